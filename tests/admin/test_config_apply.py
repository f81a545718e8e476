"""``POST /api/v1/admin/config/apply`` on a real process: the config file edited on disk is applied
live (version 2, the versions list, a diff), a broken one is refused with the --validate lines and
changes nothing, and both are audited (docs/admin.md#plugins-config-signing-key)."""
from __future__ import annotations

from collections.abc import Callable

import httpx

from tests.admin.conftest import AdminGateway


def test_apply_versions_diff_and_refusal(admin_gateway: Callable[..., AdminGateway]) -> None:
    g = admin_gateway()
    assert g.client.get("/config").json()["version"] == 1
    text = g.config_path.read_text()
    g.config_path.write_text(text + "  extra: { members: [ { model: gpt } ] }\n")
    r = g.client.post("/config/apply")
    assert r.status_code == 200
    body = r.json()
    assert (body["applied"], body["config_version"], body["faults"]) == (True, 2, [])
    assert body["changed"] and all(c.startswith("pools.extra.") for c in body["changed"])
    assert g.client.get("/config").json()["version"] == 2
    assert "extra" in g.client.get("/info").json()["pools"]
    versions = g.client.get("/config/versions").json()["items"]
    assert [(v["version"], v["source"]) for v in versions] == [(1, "boot"), (2, "api")]
    diff = g.client.get("/config/diff", params={"from": 1, "to": 2}).json()
    assert (diff["from"], diff["to"]) == (1, 2) and any(c["path"].startswith("pools.extra") for c in diff["changes"])
    gone = g.client.get("/config/diff", params={"from": 1, "to": 9})
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "not_found")

    g.config_path.write_text(text.replace("gpt: { provider: openai }", "gpt: { provider: nope }"))
    bad = g.client.post("/config/apply")
    assert bad.status_code == 400
    refused = bad.json()
    assert refused["error"]["code"] == "invalid_request"
    assert (refused["applied"], refused["config_version"]) == (False, 2)
    assert refused["faults"][0].endswith("models.gpt.provider: 'nope' is not defined under providers; fix the name "
                                         "or add the provider")
    assert refused["error"]["message"].startswith("the config on disk was refused; nothing changed: ")
    assert g.client.get("/config").json()["version"] == 2
    audit = [(a["action"], a["resource"], a["outcome"])
             for a in g.client.get("/audit", params={"action": "config.apply"}).json()["items"]]
    assert audit == [("config.apply", "config/2", "ok"), ("config.apply", "config/2", "refused")]
    # the admin plane keeps serving keys on the new gateway
    assert g.client.post("/keys", json={"name": "after-apply", "allowed_pools": ["extra"]}).json()["warnings"] == []
    assert httpx.get(g.admin + "/healthz").text == "ok"
