"""Connect-time SSRF enforcement on the request path's client: the aiohttp connector
(busbar.security.connector) under AiohttpUpstream, with the sdk's HostGuard and an injected hosts table.

Every new connection resolves the host once, checks every address with the guard and connects only
to a checked literal (DNS rebinding, case C032 (c)); redirects are returned, never followed (C032 (d)).
A provider's allow-list lives in that provider's guard only (issue 11 item 1).
"""
from __future__ import annotations

import pytest
from busbar.proxy.upstream import AiohttpUpstream, UpstreamError
from busbar.security import resolve as resolve_mod
from busbar.security.ssrf import HostGuard, SsrfBlocked, SsrfPolicy

from tests.support.rawhttp import HOSTS, Hosts, Upstream


def upstream(policy: SsrfPolicy | None = None, hosts: Hosts | None = None, *, purpose: str = "provider test",
             allow: tuple[str, ...] = (), allow_private: bool = True,
             scoped: dict[str, HostGuard] | None = None) -> AiohttpUpstream:
    guard = HostGuard(policy or SsrfPolicy(), purpose=purpose, provider_allow=allow, allow_private=allow_private)
    return AiohttpUpstream(guard, total_timeout_s=5, max_idle_per_host=8, idle_timeout_s=30,
                           resolver=hosts, scoped=scoped)


async def get(up: AiohttpUpstream, url: str, scope: str | None = None) -> tuple[int, bytes]:
    r = await up.send("GET", url, {}, scope=scope)
    try:
        return r.status, await r.read()
    finally:
        await r.aclose()


@pytest.mark.parametrize("host, reason", [
    ("imds.attacker.example", "provider test: imds.attacker.example resolved to 169.254.169.254, a cloud-metadata "
                              "address; refused at connect time by the SSRF guard"),
    ("rebind.attacker.example", "provider test: rebind.attacker.example resolved to 169.254.169.254, a "
                                "cloud-metadata address; refused at connect time by the SSRF guard"),
    ("mapped.attacker.example", "provider test: mapped.attacker.example resolved to 169.254.169.254, a "
                                "cloud-metadata address; refused at connect time by the SSRF guard"),
    ("alibaba.attacker.example", "provider test: alibaba.attacker.example resolved to 100.100.100.200, a "
                                 "cloud-metadata address; refused at connect time by the SSRF guard"),
    ("internal.attacker.example", "provider test: internal.attacker.example resolved to 10.0.0.5, a private "
                                  "(RFC 1918 / unique-local) address; refused at connect time (DNS rebinding "
                                  "guard: a DNS name must resolve to public addresses unless it is listed in "
                                  "allow_metadata_hosts)"),
    ("loop.attacker.example", "provider test: loop.attacker.example resolved to 127.0.0.1, a loopback address; "
                              "refused at connect time (DNS rebinding guard: a DNS name must resolve to public "
                              "addresses unless it is listed in allow_metadata_hosts)"),
], ids=["metadata", "mixed-answer", "ipv4-mapped-answer", "alibaba", "private-answer", "loopback-answer"])
async def test_rebinding_answers_are_refused_at_connect_time(host: str, reason: str) -> None:
    hosts = Hosts(HOSTS)
    up = upstream(hosts=hosts)
    with pytest.raises(SsrfBlocked) as exc:
        await get(up, f"https://{host}/v1/models")
    await up.aclose()
    assert exc.value.reason == reason
    assert hosts.lookups == [host]


async def test_an_allow_listed_name_on_loopback_connects_and_pools() -> None:
    hosts = Hosts(HOSTS)
    async with Upstream() as srv:
        up = upstream(hosts=hosts, allow=("api.localtest.me",))
        for _ in range(3):
            assert await get(up, f"http://api.localtest.me:{srv.port}/v1/models") == (200, b"ok")
        await up.aclose()
    assert (srv.requests, srv.connections) == (3, 1)          # keep-alive pooling intact
    assert hosts.lookups == ["api.localtest.me"]               # resolved once, per new connection


async def test_a_localhost_name_connects_on_a_loopback_only_guard() -> None:
    async with Upstream() as srv:
        up = upstream(hosts=Hosts(HOSTS), purpose="observability.otlp_url", allow_private=False)
        assert await get(up, f"http://svc.localhost:{srv.port}/v1/traces") == (200, b"ok")
        await up.aclose()


async def test_a_literal_loopback_in_any_spelling_skips_dns() -> None:
    hosts = Hosts({})
    async with Upstream() as srv:
        up = upstream(hosts=hosts)
        assert await get(up, f"http://127.0.0.1:{srv.port}/") == (200, b"ok")
        assert await get(up, f"http://0x7f.1:{srv.port}/") == (200, b"ok")   # inet_aton spelling of 127.0.0.1
        await up.aclose()
    assert hosts.lookups == []


async def test_an_obfuscated_metadata_literal_is_refused_before_any_connection() -> None:
    hosts = Hosts({})
    up = upstream(hosts=hosts)
    with pytest.raises(SsrfBlocked) as exc:
        await get(up, "http://2852039166/latest/")
    await up.aclose()
    assert exc.value.reason == ("provider test: 2852039166 (= 169.254.169.254) is a cloud-metadata endpoint; "
                                "refused by the SSRF guard (list it in allow_metadata_hosts only if this is "
                                "deliberate)")
    assert hosts.lookups == []


async def test_a_redirect_to_metadata_is_returned_never_followed() -> None:
    redirect = (b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/\r\n"
                b"Content-Length: 0\r\n\r\n")
    async with Upstream(redirect) as srv:
        up = upstream(hosts=Hosts(HOSTS))
        assert await get(up, f"http://127.0.0.1:{srv.port}/v1/chat/completions") == (302, b"")
        await up.aclose()
    assert srv.requests == 1


async def test_a_name_that_does_not_resolve_is_an_upstream_error() -> None:
    up = upstream(hosts=Hosts({}))
    with pytest.raises(UpstreamError, match=r"nowhere\.example"):
        await get(up, "https://nowhere.example/")
    await up.aclose()


async def test_the_default_resolver_is_monkeypatchable(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def fake(host: str, port: int) -> list[str]:
        seen.append(host)
        return ["169.254.170.2"]

    monkeypatch.setattr(resolve_mod, "system_resolver", fake)
    up = upstream()
    with pytest.raises(SsrfBlocked, match=r"ecs\.example resolved to 169\.254\.170\.2, a cloud-metadata address"):
        await get(up, "https://ecs.example/health")
    await up.aclose()
    assert seen == ["ecs.example"]


async def test_allow_all_metadata_lifts_only_the_metadata_denylist() -> None:
    up = upstream(SsrfPolicy(allow_all_metadata=True), Hosts(HOSTS))
    with pytest.raises(SsrfBlocked, match=r"internal\.attacker\.example resolved to 10\.0\.0\.5, a private"):
        await get(up, "https://internal.attacker.example/")
    await up.aclose()


async def test_the_next_checked_address_is_tried_when_one_does_not_answer() -> None:
    async with Upstream() as srv:
        up = upstream(hosts=Hosts({"app.localhost": ["127.0.0.2", "127.0.0.1"]}))   # nothing on 127.0.0.2
        assert await get(up, f"http://app.localhost:{srv.port}/") == (200, b"ok")
        await up.aclose()
    assert srv.connections == 1


# ------------------------------------------------------------ issue 11 item 1: scoped exceptions

async def test_an_allow_list_applies_to_its_own_scope_only() -> None:
    """Provider ``a`` allow-lists 127.0.0.1 (a metadata address here, via ``blocked_metadata_hosts``);
    provider ``b`` has no allow-list and its host resolves to that same address: ``b`` is refused at
    connect time, ``a`` connects, and neither scope's connection is reused by the other."""
    policy = SsrfPolicy(blocked_metadata_hosts=["127.0.0.1"])
    hosts = Hosts({"a.example": ["127.0.0.1"], "b.example": ["127.0.0.1"]})
    a_guard = HostGuard(policy, purpose="provider", provider_allow=("127.0.0.1",), allow_private=True)
    async with Upstream() as srv:
        up = AiohttpUpstream(HostGuard(policy, purpose="provider", allow_private=True), total_timeout_s=5,
                             max_idle_per_host=8, idle_timeout_s=30, resolver=hosts, scoped={"a": a_guard})
        # a's own connection first: b must not ride on it
        assert await get(up, f"http://127.0.0.1:{srv.port}/v1/models", scope="a") == (200, b"ok")
        with pytest.raises(SsrfBlocked) as refused:
            await get(up, f"http://127.0.0.1:{srv.port}/v1/models", scope="b")
        with pytest.raises(SsrfBlocked) as by_name:
            await get(up, f"https://b.example:{srv.port}/v1/models", scope="b")
        with pytest.raises(SsrfBlocked):
            await get(up, f"http://127.0.0.1:{srv.port}/v1/models")              # no scope: the default guard
        assert await get(up, f"http://127.0.0.1:{srv.port}/v1/models", scope="a") == (200, b"ok")
        await up.aclose()
    assert refused.value.reason == ("provider: 127.0.0.1 is a cloud-metadata endpoint; refused by the SSRF guard "
                                    "(list it in allow_metadata_hosts only if this is deliberate)")
    assert by_name.value.reason == ("provider: b.example resolved to 127.0.0.1, a cloud-metadata address; "
                                    "refused at connect time by the SSRF guard")
    assert (srv.requests, srv.connections) == (2, 1)        # a's pooled connection; b never connected


def test_the_gateway_builds_one_guard_per_declared_allow_list() -> None:
    from busbar.config.load import load_config_text
    from busbar.proxy.gateway import provider_guards

    loaded = load_config_text("""
security: { allow_metadata_hosts: [ metadata.google.internal ] }
providers:
  a: { protocol: openai, base_url: "https://a.example/v1", api_key: { env: K }, allow_metadata_hosts: [ 169.254.169.254 ] }
  b: { protocol: openai, base_url: "https://b.example/v1", api_key: { env: K } }
  c: { protocol: openai, base_url: "https://c.example/v1", api_key: { env: K }, allow_metadata_hosts: [ 169.254.169.254 ] }
  d: { protocol: openai, base_url: "https://d.example/v1", api_key: { env: K }, allow_metadata_hosts: [ 169.254.170.2 ] }
models: { m: { provider: a } }
""", {"K": "k"})
    default, scoped = provider_guards(loaded)
    assert default.provider_allow == ()
    assert sorted(scoped) == ["a", "c", "d"]                      # b: the default guard
    assert scoped["a"] is scoped["c"] and scoped["a"].provider_allow == ("169.254.169.254",)
    assert scoped["d"].provider_allow == ("169.254.170.2",)
    assert default.policy.allow_metadata_hosts == ("metadata.google.internal",)   # the global list: every guard
    assert all(g.policy is default.policy for g in scoped.values())
