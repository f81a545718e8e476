"""``busbar --workers N``: a pre-fork master over one listening socket, N worker processes.

The master binds the ``listen`` address once (:func:`listen_socket`), then forks the workers; each
worker is a whole gateway (plugins, store, upstream client, event loop) accepting on the inherited
socket, the way gunicorn and uvicorn's own supervisor share a listener. The master imports no plugin
and opens no store: it only supervises.

- **Start**: worker 0 starts first and the master waits until it is serving (or has exited), so a
  bad store or plugin is reported once and the schema is migrated by one process; then the others
  start. A worker that exits before it serves stops the whole start: the master stops the workers
  already running and exits with that worker's status.
- **Signals**: ``SIGTERM``/``SIGINT`` to the master (also one that arrives while the workers are
  still starting: the master stops them once they serve, and a worker's own stop signal during its
  boot shuts it down once it listens, ``busbar.server.stopsignals``): ``SIGTERM`` to every worker (each drains its
  connections, flushes pending usage to the store and closes it), then the master exits 0 once they
  are gone (``SIGKILL`` after their drain plus :data:`STOP_GRACE_S`). ``SIGHUP``: forwarded to
  every worker (each applies the config and rescans ``plugins.dir``: docs/operations.md).
- **Crashes**: a worker that dies while serving is replaced (logged with its status); more than
  :data:`MAX_RESPAWNS` replacements within :data:`RESPAWN_WINDOW_S` stop the fleet with exit 1.

Each worker is a node of the fleet: it must share a durable store with its siblings, so the CLI
refuses ``--workers`` > 1 with ``store.module: memory`` (docs/stores.md#a-fleet).
:func:`worker_index` tells code that must run once per host (e.g. a second listener) which worker
it is in.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable

from busbar.server import stopsignals

__all__ = ["MAX_RESPAWNS", "RESPAWN_WINDOW_S", "STOP_GRACE_S", "WORKER_ENV", "listen_socket", "run_workers",
           "worker_index"]

log = logging.getLogger("busbar")

WORKER_ENV = "BUSBAR_WORKER"
"""Set to the worker's index (``0``..``N-1``) in each worker's environment."""
STOP_GRACE_S = 15.0
"""Seconds the master waits for the workers after forwarding ``SIGTERM``, beyond their own drain
(``BUSBAR_DRAIN_SECS``, default 20 s: ``busbar.server.lifecycle.drain_secs``), before ``SIGKILL``
(the final usage flush and store close fit in it)."""
MAX_RESPAWNS, RESPAWN_WINDOW_S = 5, 60.0
"""A crash loop: more than this many replacements within this many seconds stops the fleet."""

_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD}

#: ``child(index, ready) -> exit status``: boot and serve one worker; call ``ready()`` once serving.
Child = Callable[[int, Callable[[], None]], int]


def worker_index() -> int | None:
    """This process's worker index under ``--workers``, or ``None`` when it is a single process."""
    value = os.environ.get(WORKER_ENV)
    return int(value) if value is not None and value.isdigit() else None


def listen_socket(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A bound, listening, inheritable TCP socket on ``host:port`` (IPv6 when ``host`` has a colon).

    Raises:
        OSError: the address cannot be bound (e.g. in use).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _Master:
    def __init__(self, n: int, child: Child) -> None:
        self.n, self.child = n, child
        self.pids: dict[int, int] = {}          # pid -> worker index
        self.respawns: list[float] = []
        self.stopping = False

    def spawn(self, index: int) -> tuple[int, int]:
        """Fork worker ``index``; returns ``(pid, read end of its ready pipe)``."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                                    # the worker
            os.close(r)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            stopsignals.hold()              # a stop before the worker serves: it shuts down once it listens
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)     # the plugin reloader takes it when plugins are on
            os.environ[WORKER_ENV] = str(index)
            _tag_logs(index)
            status = 1

            def ready() -> None:
                os.write(w, b"1")
            try:
                status = self.child(index, ready)
            except SystemExit as e:
                status = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - a forked worker must never return into the master
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        os.close(w)
        self.pids[pid] = index
        return pid, r

    def wait_ready(self, pid: int, r: int) -> int | None:
        """Block until worker ``pid`` serves (``None``) or exits (its exit status)."""
        try:
            got = os.read(r, 1)
        finally:
            os.close(r)
        if got:
            return None
        _, status = os.waitpid(pid, 0)
        del self.pids[pid]
        return os.waitstatus_to_exitcode(status) or 1

    @staticmethod
    def _discard(r: int) -> None:
        os.close(r)

    def signal_all(self, sig: int) -> None:
        for pid in list(self.pids):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def reap(self) -> list[tuple[int, int, int]]:
        """``(pid, index, exit status)`` of every worker that has exited."""
        gone = []
        while self.pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            index = self.pids.pop(pid, None)
            if index is not None:
                gone.append((pid, index, os.waitstatus_to_exitcode(status)))
        return gone

    def stop(self) -> None:
        """Forward ``SIGTERM`` and wait for every worker (``SIGKILL`` after the grace period)."""
        from busbar.server.lifecycle import drain_secs

        self.stopping = True
        self.signal_all(signal.SIGTERM)
        grace = drain_secs() + STOP_GRACE_S
        deadline = time.monotonic() + grace
        while self.pids:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error("workers %s did not stop within %gs; killing them", sorted(self.pids.values()), grace)
                self.signal_all(signal.SIGKILL)
                deadline = time.monotonic() + 5.0
            signal.sigtimedwait(_SIGNALS, max(0.05, min(left, 1.0)))
            self.reap()

    def start(self) -> int | None:
        """Start worker 0, then the others together; an exit status when one failed to start."""
        failed = self.wait_ready(*self.spawn(0))
        if failed is None:
            for pid, r in [self.spawn(i) for i in range(1, self.n)]:
                failed = self.wait_ready(pid, r) if failed is None else self._discard(r)
        if failed is not None:
            # told to stop while starting (a SIGTERM to the whole process group reaches a booting
            # worker too, which then exits before it serves): a stop, not a failed start
            stopping = bool(signal.sigpending() & {signal.SIGTERM, signal.SIGINT})
            self.stop()
            return 0 if stopping else failed
        log.info("busbar: %d workers serving (pids %s)", self.n, " ".join(map(str, sorted(self.pids))))
        return None

    def supervise(self) -> int:
        while True:
            info = signal.sigwaitinfo(_SIGNALS)
            if info.si_signo in (signal.SIGTERM, signal.SIGINT):
                self.stop()
                return 0
            if info.si_signo == signal.SIGHUP:
                self.signal_all(signal.SIGHUP)
                continue
            for pid, index, status in self.reap():
                now = time.monotonic()
                self.respawns = [t for t in self.respawns if now - t < RESPAWN_WINDOW_S] + [now]
                if len(self.respawns) > MAX_RESPAWNS:
                    log.error("worker %d (pid %d) exited with status %d; more than %d restarts in %gs: "
                              "stopping", index, pid, status, MAX_RESPAWNS, RESPAWN_WINDOW_S)
                    self.stop()
                    return 1
                log.error("worker %d (pid %d) exited with status %d; starting a new one", index, pid, status)
                new, r = self.spawn(index)
                if self.wait_ready(new, r) is not None:
                    log.error("worker %d failed to start again: stopping", index)
                    self.stop()
                    return 1


def run_workers(n: int, child: Child) -> int:
    """Run ``n`` workers under this process as master until ``SIGTERM``/``SIGINT``; the exit status.

    Args:
        n: the number of workers (>= 1).
        child: boots and serves one worker (``child(index, ready)`` -> its exit status), run in the
            forked process; it must call ``ready()`` once it accepts connections.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    master = _Master(n, child)
    if stopsignals.take():          # a SIGTERM/SIGINT during the master's own start: nothing to stop
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        return 0
    try:
        failed = master.start()
        if failed is not None:
            return failed
        return master.supervise()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


def _tag_logs(index: int) -> None:
    """Prefix this worker's log lines with ``[worker <index>]``."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s %(name)s [worker {index}]: %(message)s"))
