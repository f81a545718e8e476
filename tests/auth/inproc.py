"""An in-process gateway on a real socket whose store a test writes keys into.

``InProcessGateway(config_yaml, tmp_path, env).start()`` loads the config, boots the gateway,
opens the store (``busbar.store.attach.start_store``), starts the front door
(``busbar.auth.boot.start_front_door``) and serves the real data-plane app
with uvicorn on a free port, in a thread with its own event loop. :meth:`mint` writes a
:class:`~busbar_sdk.store.VirtualKey` into the gateway's store, syncs the mirror and returns a
``bbk_`` token signed with the gateway's keyring (what the admin API's mint does over HTTP).
"""
from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import uvicorn
from busbar.auth.boot import start_front_door
from busbar.auth.keys import KeysVerifier
from busbar.auth.tokens import mint
from busbar.config.load import load_config
from busbar.server.app import AppState, create_app
from busbar.server.boot import boot
from busbar.store.attach import start_store, stop_store
from busbar_sdk.store import CredentialMeta, CredentialSecret, VirtualKey

from tests.support.gateway import free_port


class InProcessGateway:
    def __init__(self, config_yaml: str, tmp_path: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = tmp_path / "config.yaml"
        self.config_path.write_text(config_yaml.replace("{port}", str(self.port)))
        self.env = {**os.environ, **env}
        self.loop = asyncio.new_event_loop()
        self._n = 0

    def start(self) -> InProcessGateway:
        self.loaded = load_config(self.config_path, None, self.env, check_support=True)
        self.gw, _ = boot(self.loaded, self.env)
        ready = threading.Event()

        async def main() -> None:
            self.tasks = await start_store(self.gw)
            self.tasks += await start_front_door(self.gw, self.loaded, self.env)
            cfg = uvicorn.Config(create_app(AppState(gateway=self.gw, started_at=time.time())), host="127.0.0.1",
                                 port=self.port, lifespan="off", log_level="warning", access_log=False)
            self.server = uvicorn.Server(cfg)
            serving = asyncio.ensure_future(self.server.serve())
            while not self.server.started:
                await asyncio.sleep(0.01)
            ready.set()
            await serving
            await stop_store(self.gw, self.tasks)

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        if not ready.wait(15):
            raise RuntimeError("in-process busbar did not start")
        return self

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the gateway's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    @property
    def verifier(self) -> KeysVerifier:
        assert self.gw.frontdoor is not None
        return next(m for m in self.gw.frontdoor.modules if isinstance(m, KeysVerifier))

    def mint(self, *, group: str | None = None, allowed_pools: list[str] | None = None, ttl: int = 3600,
             labels: dict[str, str] | None = None) -> tuple[str, str]:
        """Store a key binding and sign its token; returns ``(key id, token)``."""
        self._n += 1
        key_id = f"vk_test{self._n}"
        now = int(time.time())
        key = VirtualKey(id=key_id, name=f"k{self._n}", created_at=now, group=group, allowed_pools=allowed_pools,
                         labels=labels or {}, expires_at=now + ttl)
        self.put(key)
        assert self.gw.signing is not None
        return key_id, mint(self.gw.signing, key_id, now + ttl, 0)

    def mint_aws(self, key_id: str) -> tuple[str, str]:
        """Store a ``sigv4`` credential for ``key_id``; returns ``(access key id, secret access key)``."""
        self._n += 1
        akid, secret = f"BBAKTEST{self._n:012d}", f"secret-{self._n:033d}"
        meta = CredentialMeta(id=f"cred_{self._n}", key_id=key_id, kind="sigv4", slot=0, public_id=akid,
                              created_at=int(time.time()))
        self.run(self.verifier.keysync.store.put_credential(CredentialSecret(meta, f"v1:plain:{secret}")))
        self.run(self.verifier.keysync.sync())
        return akid, secret

    def put(self, key: VirtualKey) -> None:
        """Write ``key`` to the store and sync the mirror."""
        self.run(self.verifier.keysync.store.put_key(key))
        self.run(self.verifier.keysync.sync())

    def revoke(self, key_id: str) -> None:
        """Deny ``key_id`` the way the admin API's revoke does, and sync the mirror."""
        self.run(self.verifier.keysync.store.add_denylist(key_id, "test", int(time.time())))
        self.run(self.verifier.keysync.sync())

    def stop(self) -> None:
        if getattr(self, "server", None) is not None:
            self.server.should_exit = True
        self.thread.join(10)
