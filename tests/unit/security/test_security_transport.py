"""Connect-time SSRF enforcement (handout C032 (c)): the guard sees what a name RESOLVES to.

No network: the resolver is injected (a hosts table), the upstream is a local asyncio server on 127.0.0.1.
"""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from busbar.security import resolve as resolve_mod
from busbar.security.ssrf import (
    GuardedTransport,
    SsrfBlocked,
    SsrfPolicy,
    guarded_async_client,
    guarded_transport,
)

from tests.support.rawhttp import HOSTS, Hosts, Upstream


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream() as up:
        yield up


def client_for(policy: SsrfPolicy, resolver: Hosts, **kw: object) -> httpx.AsyncClient:
    return guarded_async_client(policy, purpose="provider test", allow_private=True, resolver=resolver,
                                **kw)  # type: ignore[arg-type]


async def test_name_resolving_to_metadata_is_refused_at_connect_time() -> None:
    resolver = Hosts(HOSTS)
    async with client_for(SsrfPolicy(), resolver) as client:
        with pytest.raises(SsrfBlocked) as exc:
            await client.get("https://imds.attacker.example/latest/meta-data/")
    assert exc.value.reason == ("provider test: imds.attacker.example resolved to 169.254.169.254, a "
                                "cloud-metadata address; refused at connect time by the SSRF guard")
    assert resolver.lookups == ["imds.attacker.example"]


@pytest.mark.parametrize("host, needle", [
    ("rebind.attacker.example", "resolved to 169.254.169.254, a cloud-metadata address"),
    ("mapped.attacker.example", "resolved to 169.254.169.254, a cloud-metadata address"),
    ("alibaba.attacker.example", "resolved to 100.100.100.200, a cloud-metadata address"),
    ("internal.attacker.example", "resolved to 10.0.0.5, a private (RFC 1918 / unique-local) address; "
                                  "refused at connect time (DNS rebinding guard"),
    ("loop.attacker.example", "resolved to 127.0.0.1, a loopback address; refused at connect time"),
], ids=["mixed-answer", "ipv4-mapped-answer", "alibaba", "private-answer", "loopback-answer"])
async def test_rebinding_answers_are_refused(host: str, needle: str) -> None:
    async with client_for(SsrfPolicy(), Hosts(HOSTS)) as client:
        with pytest.raises(SsrfBlocked) as exc:
            await client.get(f"https://{host}/v1/models")
    assert needle in exc.value.reason


async def test_allow_listed_name_resolving_to_loopback_connects_and_pools(upstream: Upstream) -> None:
    resolver = Hosts(HOSTS)
    policy = SsrfPolicy()
    transport = guarded_transport(policy, purpose="provider local", allow_private=True,
                                  provider_allow=["api.localtest.me"], resolver=resolver,
                                  limits=httpx.Limits(max_keepalive_connections=4))
    assert isinstance(transport, GuardedTransport)
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        for _ in range(3):
            r = await client.get(f"http://api.localtest.me:{upstream.port}/v1/models")
            assert r.status_code == 200 and r.text == "ok"
    assert upstream.requests == 3
    assert upstream.connections == 1  # keep-alive pooling intact
    assert resolver.lookups == ["api.localtest.me"]  # resolved once, per new connection


async def test_localhost_name_connects_without_allow_list(upstream: Upstream) -> None:
    async with guarded_async_client(SsrfPolicy(), purpose="observability.otlp_url", allow_private=False,
                                    resolver=Hosts(HOSTS)) as client:
        r = await client.get(f"http://svc.localhost:{upstream.port}/v1/traces")
    assert r.status_code == 200


async def test_literal_loopback_skips_dns(upstream: Upstream) -> None:
    resolver = Hosts({})
    async with client_for(SsrfPolicy(), resolver) as client:
        r = await client.get(f"http://127.0.0.1:{upstream.port}/")
        r2 = await client.get(f"http://0x7f.1:{upstream.port}/")  # inet_aton spelling of 127.0.0.1
    assert r.status_code == r2.status_code == 200
    assert resolver.lookups == []


async def test_obfuscated_literal_metadata_refused_before_any_connection() -> None:
    resolver = Hosts({})
    async with client_for(SsrfPolicy(), resolver) as client:
        with pytest.raises(SsrfBlocked, match=r"2852039166 \(= 169\.254\.169\.254\) is a cloud-metadata"):
            await client.get("http://2852039166/latest/")
    assert resolver.lookups == []


async def test_per_request_check_applies_to_every_url() -> None:
    """A URL the config never saw (redirect target, rewritten URL) gets the config-time verdict too."""
    async with client_for(SsrfPolicy(), Hosts(HOSTS)) as client:
        with pytest.raises(SsrfBlocked, match="uses http:// with a public host"):
            await client.get("http://api.openai.com/v1/models")


REDIRECT = (b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/\r\n"
            b"Content-Length: 0\r\n\r\n")


async def test_redirect_to_metadata_is_not_followed() -> None:
    """C032 (d): a public upstream answering 302 -> IMDS; the redirect is returned, never followed."""
    async with Upstream(REDIRECT) as up, client_for(SsrfPolicy(), Hosts(HOSTS), timeout=5) as client:
        r = await client.get(f"http://127.0.0.1:{up.port}/v1/chat/completions")
    assert r.status_code == 302 and client.follow_redirects is False


async def test_redirect_hop_is_checked_even_if_following_is_turned_on() -> None:
    async with Upstream(REDIRECT) as up, client_for(SsrfPolicy(), Hosts(HOSTS), follow_redirects=True) as client:
        with pytest.raises(SsrfBlocked, match=r"169.254.169.254 is a cloud-metadata endpoint"):
            await client.get(f"http://127.0.0.1:{up.port}/v1/chat/completions")
    assert up.requests == 1


async def test_resolution_failure_is_a_connect_error() -> None:
    async with client_for(SsrfPolicy(), Hosts({})) as client:
        with pytest.raises(httpx.ConnectError, match=r"cannot resolve nowhere.example"):
            await client.get("https://nowhere.example/")


async def test_default_resolver_is_monkeypatchable(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def fake(host: str, port: int) -> list[str]:
        seen.append(host)
        return ["169.254.170.2"]

    monkeypatch.setattr(resolve_mod, "system_resolver", fake)
    transport = guarded_transport(SsrfPolicy(), purpose="health probe", allow_private=True)
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        with pytest.raises(SsrfBlocked, match=r"ecs.example resolved to 169.254.170.2"):
            await client.get("https://ecs.example/health")
    assert seen == ["ecs.example"]


async def test_allow_all_metadata_lifts_only_the_metadata_denylist() -> None:
    policy = SsrfPolicy(allow_all_metadata=True)
    async with client_for(policy, Hosts(HOSTS)) as client:
        # metadata is no longer refused by the guard; the name still may not rebind into private space
        with pytest.raises(SsrfBlocked, match=r"10.0.0.5"):
            await client.get("https://internal.attacker.example/")


@pytest.mark.parametrize("kwargs", [{"proxy": "http://proxy:3128"}, {"uds": "/tmp/x.sock"}])
def test_bypassing_options_are_refused(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="would bypass the SSRF guard"):
        guarded_transport(SsrfPolicy(), purpose="p", allow_private=True, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"transport": httpx.AsyncHTTPTransport()}, {"trust_env": True},
                                    {"mounts": {}}])
def test_client_bypasses_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="guarded_async_client"):
        guarded_async_client(SsrfPolicy(), purpose="p", allow_private=True, **kwargs)  # type: ignore[arg-type]


def test_transport_kwargs_pass_through() -> None:
    t = guarded_transport(SsrfPolicy(), purpose="p", allow_private=True,
                          limits=httpx.Limits(max_connections=7, max_keepalive_connections=3), retries=2)
    pool = t._pool  # type: ignore[attr-defined]
    assert pool._max_connections == 7 and pool._max_keepalive_connections == 3 and pool._retries == 2
    assert type(pool._network_backend).__name__ == "_GuardedBackend"


async def test_falls_back_to_the_next_checked_address(upstream: Upstream) -> None:
    resolver = Hosts({"app.localhost": ["127.0.0.2", "127.0.0.1"]})  # nothing listens on 127.0.0.2
    async with client_for(SsrfPolicy(), resolver) as client:
        r = await client.get(f"http://app.localhost:{upstream.port}/")
    assert r.status_code == 200 and upstream.connections == 1
