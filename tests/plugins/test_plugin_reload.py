"""Hot reload: SIGHUP rescans plugins.dir and swaps the set atomically; a failed reload keeps the
running set and logs why; traffic never sees a failed request while plugins come and go.

Source: issue 4 (hot reload) (a reload swaps a new registry in whole).
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from busbar.loader import LoadedPlugin, PluginInstance, PluginReloader

from tests.plugins.helpers import decide, make_cfg


@pytest.fixture
def reloader(tmp_path, keys, staging):
    r = PluginReloader(make_cfg(keys), base_dir=tmp_path, staging=staging, release_key=None)
    yield r
    r.close()


def test_reload_adds_and_removes_a_plugin_under_traffic(pack, plugdir, tmp_path, reloader) -> None:
    pack(plugdir / "hello.tar.gz")
    spare = tmp_path / "spare"
    spare.mkdir()
    plain_v1 = pack(spare / "plain.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    plain_v2 = pack(spare / "plain2.tar.gz", wheel="plain2", name="plain-hook", alias="plain", version="2.0.0")
    reloader.start()

    errors: list[BaseException] = []
    calls = {"hello": 0, "plain": 0}
    seen_versions: set[int] = set()
    stop = threading.Event()

    def traffic() -> None:
        instances: dict[int, PluginInstance] = {}

        def instance(p: LoadedPlugin) -> PluginInstance:
            key = id(p.binding)
            if key not in instances:
                instances[key] = p.open({})
            return instances[key]

        while not stop.is_set():
            try:
                ps = reloader.current  # one snapshot per request
                assert instance(ps.get("hello")).call(decide(3)) == {"order": [2, 1, 0]}
                calls["hello"] += 1
                plain = ps.get("plain")
                if plain is not None:
                    reply = instance(plain).call(decide(2))
                    assert reply["order"] == [0, 1]
                    seen_versions.add(reply["v"])
                    calls["plain"] += 1
            except BaseException as exc:  # noqa: BLE001 - every failure is a failed request
                errors.append(exc)
                return

    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for source in (plain_v1, plain_v2, plain_v2):
            shutil.copy(source, plugdir / "plain.tar.gz")
            assert reloader.reload()
            assert reloader.current.get("plain") is not None
            time.sleep(0.05)
            (plugdir / "plain.tar.gz").unlink()
            assert reloader.reload()
            assert reloader.current.get("plain") is None
            time.sleep(0.05)
        shutil.copy(plain_v1, plugdir / "plain.tar.gz")   # back to 1.0.0 after 2.0.0: a downgrade
        assert not reloader.reload()
        assert reloader.current.get("plain") is None
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert calls["hello"] > 0 and calls["plain"] > 0
    assert seen_versions <= {1, 2}


def test_upgrade_swaps_the_code(pack, plugdir, tmp_path, reloader) -> None:
    pack(plugdir / "plain.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    old = reloader.start().get("plain")
    old_inst = old.open({})
    (plugdir / "plain.tar.gz").unlink()
    pack(plugdir / "plain2.tar.gz", wheel="plain2", name="plain-hook", alias="plain", version="2.0.0")
    assert reloader.reload()
    new = reloader.current.get("plain")
    assert new.open({}).call(decide(1))["v"] == 2
    assert old_inst.call(decide(1))["v"] == 1  # an instance of the retired set keeps working
    assert sys.modules["plain_hook"].VERSION == 2


def test_identical_tarballs_are_reused_not_reimported(pack, plugdir, reloader) -> None:
    pack(plugdir / "hello.tar.gz")
    first = reloader.start().get("hello")
    assert reloader.reload()
    again = reloader.current.get("hello")
    assert again is not first and again.binding is first.binding and again.directory == first.directory


def test_failed_reload_keeps_the_running_set_and_logs_why(pack, plugdir, reloader, caplog) -> None:
    pack(plugdir / "hello.tar.gz")
    running = reloader.start()
    (plugdir / "junk.tar.gz").write_bytes(b"junk")
    with caplog.at_level(logging.ERROR, logger="busbar.plugins"):
        assert reloader.reload() is False
    assert reloader.current is running
    assert any(m.startswith("plugin reload failed; keeping the running set (1 plugins): plugins/junk.tar.gz: "
                            "not a gzip-compressed tar archive") for m in caplog.messages)
    assert running.get("hello").open({}).call(decide(2)) == {"order": [1, 0]}


def test_failed_import_during_an_upgrade_restores_the_old_modules(pack, plugdir, reloader) -> None:
    pack(plugdir / "plain.tar.gz", wheel="plain", name="plain-hook", alias="plain")
    running = reloader.start()
    (plugdir / "plain.tar.gz").unlink()
    pack(plugdir / "plain2.tar.gz", wheel="plain2", name="plain-hook", alias="plain", version="2.0.0")
    pack(plugdir / "wrong.tar.gz", wheel="wrongkind", name="wrong-kind", alias="wk")  # fails at import
    assert reloader.reload() is False
    assert reloader.current is running
    assert sys.modules["plain_hook"].VERSION == 1
    import plain_hook
    assert plain_hook.VERSION == 1
    assert running.get("plain").open({}).call(decide(1))["v"] == 1


def test_reload_with_a_new_policy(pack, plugdir, keys, reloader) -> None:
    pack(plugdir / "hello.tar.gz")
    reloader.start()
    assert reloader.reload(make_cfg(keys, publishers=("other",)))
    assert reloader.current.get("hello") is None and reloader.current.records[0].status == "SKIPPED"


def test_on_swap_callback(pack, plugdir, tmp_path, keys, staging) -> None:
    swaps = []
    r = PluginReloader(make_cfg(keys), base_dir=tmp_path, staging=staging, release_key=None,
                       on_swap=lambda old, new: swaps.append((len(old), len(new))))
    try:
        r.start()
        pack(plugdir / "hello.tar.gz")
        assert r.reload()
        assert swaps == [(0, 1)]
    finally:
        r.close()


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="SIGHUP is POSIX-only")
def test_sighup_triggers_a_reload(pack, plugdir, reloader) -> None:
    reloader.start()
    previous = signal.getsignal(signal.SIGHUP)
    try:
        reloader.install_sighup()
        pack(plugdir / "hello.tar.gz")
        os.kill(os.getpid(), signal.SIGHUP)
        deadline = time.monotonic() + 10
        while reloader.current.get("hello") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert reloader.current.get("hello") is not None
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_close_removes_everything_it_unpacked(pack, plugdir, tmp_path, keys, staging) -> None:
    pack(plugdir / "hello.tar.gz")
    r = PluginReloader(make_cfg(keys), base_dir=tmp_path, staging=staging, release_key=None)
    r.start()
    assert len(list(staging.root.iterdir())) == 1
    r.close()
    assert list(staging.root.iterdir()) == [] and "hello_order" not in sys.modules
    assert Path(tmp_path / "plugins" / "hello.tar.gz").exists()  # the operator's files are untouched
