"""Mint against the group tree (configured groups, parent: auto-provisioning with child_default, the
anti-sprawl caps), scope refusals of delegated credentials, and the per-principal mutation budget:
the real admin app and key service in-process on a real gateway and store (docs/admin.md)."""
from __future__ import annotations

from tests.admin.inproc import admin_app

GROUPS = """
groups:
  org:
    child_default: { limits: [ { budget: 500, per: month } ] }
  eng:
    parent: org
    child_default: { limits: [ { budget: 2000, per: month } ] }
  accounting:
    parent: org
"""


async def test_group_must_exist_and_parent_must_match() -> None:
    async with admin_app(GROUPS) as (c, _):
        ok = await c.post("/keys", json={"name": "a", "group": "eng"})
        assert (ok.status_code, ok.json()["group"]) == (201, "eng")
        same = await c.post("/keys", json={"name": "a", "group": "eng", "parent": "org"})
        assert same.status_code == 201
        moved = await c.post("/keys", json={"name": "a", "group": "eng", "parent": "accounting"})
        assert moved.status_code == 409
        assert moved.json() == {"error": {"code": "conflict", "message":
                                          "group 'eng' exists with parent 'org', not 'accounting'; a mint never "
                                          "re-homes a group (omit parent or name its actual parent)"}}
        root = await c.post("/keys", json={"name": "a", "group": "org", "parent": "eng"})
        assert root.json()["error"]["message"] == ("group 'org' exists with parent none, not 'eng'; a mint never "
                                                   "re-homes a group (omit parent or name its actual parent)")
        missing = await c.post("/keys", json={"name": "a", "group": "ops"})
        assert missing.status_code == 400
        assert missing.json()["error"]["code"] == "invalid_request"


async def test_parent_auto_provisions_with_the_nearest_child_default() -> None:
    async with admin_app(GROUPS) as (c, ctx):
        r = await c.post("/keys", json={"name": "bob", "group": "user:bob", "parent": "eng"})
        assert (r.status_code, r.json()["group"]) == (201, "user:bob")
        r = await c.post("/keys", json={"name": "ann", "group": "user:ann", "parent": "accounting"})
        assert r.status_code == 201
        groups = ctx.runtime_groups.all()
        assert sorted(groups) == ["user:ann", "user:bob"]
        assert groups["user:bob"].parent == "eng"
        assert [lim.model_dump(exclude_none=True) for lim in groups["user:bob"].limits] == [
            {"budget": 2000, "per": "month"}]
        assert [lim.model_dump(exclude_none=True) for lim in groups["user:ann"].limits] == [
            {"budget": 500, "per": "month"}]
        again = await c.post("/keys", json={"name": "bob2", "group": "user:bob", "parent": "eng"})
        assert again.status_code == 201 and len(ctx.runtime_groups) == 2
        assert (await c.post("/keys", json={"name": "x", "group": "user:bob", "parent": "org"})).status_code == 409
        # persisted in the store meta, read back by a fresh loader
        assert '"user:bob"' in (await ctx.store.get_meta("groups.runtime") or "")
        audit = [(a["action"], a["resource"]) for a in (await c.get("/audit")).json()["items"]]
        assert ("group.provision", "group/user:bob") in audit


async def test_over_cap_auto_provisioning_is_409() -> None:
    async with admin_app(GROUPS + "limits: { max_auto_provisioned_groups: 1 }\n") as (c, _):
        assert (await c.post("/keys", json={"name": "a", "group": "u1", "parent": "eng"})).status_code == 201
        r = await c.post("/keys", json={"name": "b", "group": "u2", "parent": "eng"})
        assert r.status_code == 409
        assert r.json() == {"error": {"code": "conflict", "message":
                                      "1 group(s) have been auto-provisioned, the limits.max_auto_provisioned_groups "
                                      "cap; bind to an existing group"}}
        assert (await c.post("/keys", json={"name": "c", "group": "eng"})).status_code == 201


async def test_over_cap_keys_per_group_is_409_on_mint_and_rebind() -> None:
    async with admin_app(GROUPS + "limits: { max_keys_per_principal: 2 }\n") as (c, _):
        ids = [(await c.post("/keys", json={"name": "a", "group": "eng"})).json()["id"] for _ in range(2)]
        r = await c.post("/keys", json={"name": "a", "group": "eng"})
        assert r.status_code == 409
        assert r.json() == {"error": {"code": "conflict", "message":
                                      "group 'eng' already has 2 live key(s), the limits.max_keys_per_principal "
                                      "cap; revoke or delete one first"}}
        other = (await c.post("/keys", json={"name": "b", "group": "accounting"})).json()["id"]
        rebind = await c.patch(f"/keys/{other}", json={"group": "eng"})
        assert (rebind.status_code, rebind.json()["error"]["code"]) == (409, "conflict")
        await c.post(f"/keys/{ids[0]}/revoke")
        assert (await c.patch(f"/keys/{other}", json={"group": "eng"})).status_code == 200


async def test_delegated_scopes_are_enforced_per_route() -> None:
    scoped = [("ro", "viewer", frozenset({"read-only"})), ("mint", "portal", frozenset({"mint"})),
              ("hooks", "hooker", frozenset({"hooks-register"}))]
    async with admin_app(scoped=scoped) as (c, _):
        def h(tok: str) -> dict[str, str]:
            return {"authorization": f"Bearer {tok}"}
        assert (await c.get("/keys", headers=h("ro"))).status_code == 200
        r = await c.post("/keys", json={"name": "x"}, headers=h("ro"))
        assert r.status_code == 403
        assert r.json() == {"error": {"code": "forbidden", "message":
                                      "POST /api/v1/admin/keys needs the 'mint' admin scope; this credential holds "
                                      "read-only"}}
        minted = await c.post("/keys", json={"name": "x"}, headers=h("mint"))
        assert minted.status_code == 201
        kid = minted.json()["id"]
        r = await c.post(f"/keys/{kid}/revoke", headers=h("mint"))
        assert r.status_code == 403
        assert r.json()["error"]["message"] == ("POST /api/v1/admin/keys/{key_id}/revoke needs the 'full' admin "
                                                "scope; this credential holds mint")
        assert (await c.post("/keys", json={"name": "x"}, headers=h("hooks"))).status_code == 403
        assert (await c.post("/config/validate", json={"config": "{}"}, headers=h("ro"))).status_code == 200
        assert (await c.post(f"/keys/{kid}/revoke")).status_code == 200
        audit = (await c.get("/audit")).json()["items"]
        refused = [(a["action"], a["outcome"], a["principal"]) for a in audit if a["outcome"] != "ok"]
        assert ("POST /api/v1/admin/keys", "forbidden", "viewer") in refused


async def test_mutation_budget_is_429_with_retry_after() -> None:
    now = [1_000_000.0]          # 40 s into a minute window
    async with admin_app(clock=lambda: now[0]) as (c, _):
        for _ in range(10):
            assert (await c.post("/config/validate", json={"config": "{}"})).status_code == 200
        r = await c.post("/config/validate", json={"config": "{}"})
        assert (r.status_code, r.headers["retry-after"]) == (429, "20")
        assert r.json() == {"error": {"code": "rate_limited", "message":
                                      "too many admin changes by 'admin-tokens' this minute; retry in 20 s"}}
        assert (await c.get("/keys")).status_code == 200          # reads are not budgeted
        assert (await c.post("/keys", json={"name": "k"})).status_code == 201   # another class
        now[0] += 20
        assert (await c.post("/config/validate", json={"config": "{}"})).status_code == 200


async def test_store_error_is_500_internal_without_details() -> None:
    from busbar_sdk.store import MemoryStore, StoreUnavailable

    class Failing(MemoryStore):
        async def list_keys(self, since: int = 0) -> list:  # type: ignore[override,type-arg]
            raise StoreUnavailable("postgres at postgres://u:***@10.0.0.5:5432/db is unavailable")

    async with admin_app(store=Failing()) as (c, _):
        r = await c.get("/keys")
        assert (r.status_code, r.json()) == (500, {"error": {"code": "internal", "message":
                                                             "the store is unreachable; see the server log"}})
