"""The mutation budget counts changes, not refusals, and never blocks a revoke (docs/admin.md#rate-limits).

Through a real busbar process: 61 invalid POSTs by the operator token are each a 400 and spend
nothing (60 valid mints follow, the 61st is the 429), and a revoke still goes through with the
budget spent.
"""
from __future__ import annotations

import time

from tests.admin.conftest import AdminGateway

WINDOW_S = 60


def _fresh_window() -> None:
    """Wait out a budget window with under 20 s left: the windows are fixed minutes of the
    system-wide monotonic clock, which this process reads as the gateway does."""
    left = WINDOW_S - time.monotonic() % WINDOW_S
    if left < 20:
        time.sleep(left + 0.1)


def test_invalid_mutations_are_not_budgeted_and_revoke_is_exempt(admin_gateway) -> None:  # type: ignore[no-untyped-def]
    g: AdminGateway = admin_gateway()
    _fresh_window()
    victim = g.client.post("/keys", json={"name": "leaked"}).json()          # 1 of 60
    for i in range(61):
        r = (g.client.post("/keys", json={"name": "x", "bogus": i}) if i % 2 else
             g.client.post("/keys", content=b"notjson", headers={"content-type": "application/json"}))
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
    for i in range(59):                                                       # 2..60 of 60
        assert g.client.post("/keys", json={"name": f"k{i}"}).status_code == 201
    over = g.client.post("/keys", json={"name": "one-too-many"})
    assert over.status_code == 429
    assert over.json()["error"]["code"] == "rate_limited"
    assert over.json()["error"]["message"].startswith("too many admin changes by 'admin-tokens' this minute; retry in ")
    r = g.client.post(f"/keys/{victim['id']}/revoke", json={"reason": "leaked"})
    assert (r.status_code, r.json()["id"], r.json()["state"]) == (200, victim["id"], "revoked")
