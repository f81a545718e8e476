"""A busbar process whose requests charge through a group: a key bound to the group, minted and sent.

``GroupKeyProcess(config_yaml, tmp_path, group=None, env=None)`` is a :class:`BusbarProcess` whose
config also runs the built-in ``keys`` chain and the admin plane (an admin token and a free admin
port are added; the YAML must not have its own ``auth:`` or ``admin_listen:``). ``start()`` mints a
key bound to ``group`` (``None``: a key bound to no group, since the chain wants a key) through
``POST /api/v1/admin/keys`` and waits until the data plane knows it (``mint=False``: none is minted;
a node of a fleet that shares another node's key). Then:

- ``.token``: the minted key; ``.headers``: ``{"authorization": "Bearer <token>"}`` (every data-plane
  route and ``/metrics`` take it: the keys chain guards them);
- ``.admin``: an ``httpx.Client`` on ``/api/v1/admin`` with the admin token;
- ``.mint(group, **fields) -> (key_id, token)``: one more key (``fields``: ``parent``, ``allowed_pools``…),
  ready on every node of ``nodes`` (default: this one) when it returns.

:func:`mint_key` is the same minting for a test that runs its own admin plane; :func:`await_key`
waits until data planes (a node started later, say) accept a key.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

ADMIN_TOKEN = "adm-groupkey-5d2e"
_PLANE = """
admin_listen: "127.0.0.1:{admin_port}"
auth:
  chain: [ keys ]
  admin_auth: [ { admin-tokens: { token: { env: T_ADMIN_TOKEN } } } ]
"""


def mint_key(admin: httpx.Client, urls: Iterable[str], group: str | None, **fields: Any) -> tuple[str, str]:
    """Mint a key bound to ``group`` (``None``: bound to none) with the admin client ``admin`` and
    wait until every data plane in ``urls`` knows it (:func:`await_key`). Returns ``(key_id, token)``."""
    body = {"name": f"k-{group or 'none'}", **({"group": group} if group is not None else {}), **fields}
    r = admin.post("/keys", json=body)
    assert r.status_code == 201, r.text
    key_id: str = r.json()["id"]
    token: str = r.json()["token"]
    await_key(urls, token)
    return key_id, token


def await_key(urls: Iterable[str], token: str) -> None:
    """Wait until every data plane in ``urls`` accepts ``token``: a request naming no pool is then a
    404 (a 403 for a key whose grant does not cover that name), no longer a 401."""
    probe = {"model": "no-such-pool", "messages": [{"role": "user", "content": "hi"}]}
    for url in urls:
        wait_until(lambda url=url: httpx.post(url + "/v1/chat/completions", json=probe, timeout=5,
                                              headers={"authorization": f"Bearer {token}"}).status_code in (403, 404),
                   what="the minted key synced")


class GroupKeyProcess(BusbarProcess):
    """See the module docstring."""

    def __init__(self, config_yaml: str, tmp_path: Path, group: str | None = None, env: dict | None = None,
                 mint: bool = True, **kwargs: Any) -> None:
        assert "\nauth:" not in config_yaml and "admin_listen:" not in config_yaml, "the helper adds both"
        self.admin_port = free_port()
        super().__init__(config_yaml + _PLANE.replace("{admin_port}", str(self.admin_port)), tmp_path,
                         env={"T_ADMIN_TOKEN": ADMIN_TOKEN, **(env or {})}, **kwargs)
        self.group = group
        self.minting = mint
        self.token = ""
        self.headers: dict[str, str] = {}
        self.admin = self._admin()

    def _admin(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.admin_port}/api/v1/admin", timeout=30,
                            headers={"authorization": f"Bearer {ADMIN_TOKEN}"})

    def start(self, timeout: float = 15.0) -> GroupKeyProcess:
        super().start(timeout)
        if self.admin.is_closed:           # started again after a stop
            self.admin = self._admin()
        if self.minting and not self.token:
            self.token = self.mint(self.group)[1]
            self.headers = {"authorization": f"Bearer {self.token}"}
        return self

    def mint(self, group: str | None, nodes: Iterable[BusbarProcess] | None = None, **fields: Any) -> tuple[str, str]:
        """A key bound to ``group`` (see the module docstring)."""
        return mint_key(self.admin, [n.url for n in (nodes or [self])], group, **fields)

    def stop(self) -> None:
        self.admin.close()
        super().stop()
