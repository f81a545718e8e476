"""OAuth token minting over the request path's client (busbar.proxy.credentials on AiohttpUpstream):
real sockets to a raw HTTP/1.1 token endpoint (tests/support/rawhttp.py); each failure is a
CredentialError whose text names the cause (the attempt logs it and fails over as an auth failure)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from busbar.proxy import credentials as creds_mod
from busbar.proxy.credentials import CredentialError, Credentials
from busbar.proxy.upstream import AiohttpUpstream
from busbar.security.ssrf import HostGuard, SsrfPolicy

from tests.support.rawhttp import HOSTS, Hosts, Upstream


def provider(token_url: str) -> SimpleNamespace:
    return SimpleNamespace(name="cc", auth="oauth-client-credentials", api_key="my-client:s3cret",
                           token_url=token_url, scope=None)


def upstream() -> AiohttpUpstream:
    guard = HostGuard(SsrfPolicy(), purpose="provider", allow_private=True)
    return AiohttpUpstream(guard, total_timeout_s=30, max_idle_per_host=8, idle_timeout_s=30,
                           resolver=Hosts(HOSTS))


async def test_a_silent_token_endpoint_times_out_with_a_named_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    async def silent(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(2)

    monkeypatch.setattr(creds_mod, "TOKEN_TIMEOUT_S", 0.2)
    async with Upstream(responder=silent) as up:
        up_client = upstream()
        with pytest.raises(CredentialError) as exc:
            await Credentials(up_client).headers(provider(f"http://127.0.0.1:{up.port}/token"))
        await up_client.aclose()
    assert str(exc.value) == "provider cc: token endpoint unreachable: timed out"


async def test_a_token_endpoint_resolving_to_metadata_is_a_credential_error() -> None:
    up_client = upstream()
    with pytest.raises(CredentialError) as exc:
        await Credentials(up_client).headers(provider("https://imds.attacker.example/token"))
    await up_client.aclose()
    assert str(exc.value) == ("provider cc: token endpoint refused by the SSRF guard: provider: "
                              "imds.attacker.example resolved to 169.254.169.254, a cloud-metadata address; "
                              "refused at connect time by the SSRF guard")
