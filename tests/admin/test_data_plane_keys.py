"""Keys minted over the admin API against the data plane's ``keys`` verifier (a real process,
``auth.chain: [keys]``): a minted token is admitted, a revoked, rotated-away or deleted one gets the
native 401 (the audit of refused uses is tested with the front door, tests/auth)."""
from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.admin.conftest import BASE, AdminGateway
from tests.support.waiting import wait_until


def chat(g: AdminGateway, token: str) -> httpx.Response:
    return httpx.post(g.url + "/v1/chat/completions", headers={"authorization": f"Bearer {token}"}, timeout=30,
                      json={"model": "fast", "messages": [{"role": "user", "content": "hi"}]})


def test_revoke_rotate_delete_reach_the_data_plane(admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway(base=_chain_base())
    first = g.client.post("/keys", json={"name": "dp"}).json()
    assert chat(g, first["token"]).status_code != 401           # admitted (the upstream is unreachable)
    rotated = g.client.post(f"/keys/{first['id']}/rotate").json()
    wait_until(lambda: chat(g, first["token"]).status_code == 401, what="the rotated-away token refused")
    assert chat(g, rotated["token"]).status_code != 401
    g.client.post(f"/keys/{first['id']}/revoke")
    refused = wait_until(lambda: (r := chat(g, rotated["token"])).status_code == 401 and r,
                         what="the revoked token refused")
    assert refused.json()["error"]["code"] == "invalid_api_key"

    other = g.client.post("/keys", json={"name": "dp2"}).json()
    g.client.delete(f"/keys/{other['id']}")
    wait_until(lambda: chat(g, other["token"]).status_code == 401, what="the deleted key refused")
    assert g.client.get("/audit/verify").json()["ok"] is True


def _chain_base() -> str:
    return BASE.replace("\nauth:\n", "\nauth:\n  chain: [keys]\n", 1)
