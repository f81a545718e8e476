"""Front-door hardening through a real busbar process (``auth.chain: [keys]``, keys minted over its
admin API): one token spelling per key, ad-hoc routes need an explicit grant, the catalog and
per-pool health are behind the chain, the key is checked before the body is parsed, and a repeated
credential header is refused (docs/auth.md).
"""
from __future__ import annotations

import httpx
import openai
import pytest

from tests.auth.conftest import PROTOCOLS, config
from tests.auth.shapes import REQUESTS, assert_refused, forbidden, post
from tests.auth.test_admin_keys_e2e import Gateway
from tests.auth.test_tokens import aliases


@pytest.fixture(scope="module")
def gw(tmp_path_factory, mock):
    g = Gateway(config(), tmp_path_factory.mktemp("hardening"), mock.url)
    g.start()
    yield g
    g.stop()


def test_only_the_minted_spelling_of_a_token_is_accepted(gw, mock):
    token = gw.mint()["token"]
    assert post(gw.url, "openai", {"authorization": f"Bearer {token}"}).status_code == 200
    mock.clear()
    payload, sig = token.split(".")
    for alt in aliases(sig):
        assert_refused(post(gw.url, "openai", {"authorization": f"Bearer {payload}.{alt}"}), "openai")
    assert mock.requests() == []


ADHOC = "/up-anthropic/claude-x/v1/messages"
ADHOC_BODY = {"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
ADHOC_FORBIDDEN = {"type": "error", "error": {
    "type": "permission_error",
    "message": "this key may not use pool 'up-anthropic': it is not in the key's allowed_pools"}}


@pytest.mark.parametrize("grant", [{}, {"allowed_pools": ["to-anthropic"]}])
def test_an_adhoc_route_needs_the_provider_listed(gw, mock, grant):
    token = gw.mint(**grant)["token"]
    r = httpx.post(gw.url + ADHOC, headers={"x-api-key": token}, json=ADHOC_BODY, timeout=10)
    assert (r.status_code, r.json()) == (403, ADHOC_FORBIDDEN)
    assert mock.requests() == []


def test_an_adhoc_route_is_served_to_a_key_listing_the_provider(gw, mock):
    minted = gw.mint(allowed_pools=["up-anthropic", "m-openai"])
    assert minted["warnings"] == []                  # a provider or a model is a grant, not a typo
    token = minted["token"]
    r = httpx.post(gw.url + ADHOC, headers={"x-api-key": token}, json=ADHOC_BODY, timeout=10)
    assert r.status_code == 200, r.text
    assert r.json()["type"] == "message"
    assert len(mock.requests()) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("body", [b"notjson", b"[1, 2]", b'{"model": 7}'])
def test_the_key_is_checked_before_the_body_is_parsed(gw, mock, protocol, body):
    r = httpx.post(gw.url + REQUESTS[protocol][0], content=body, timeout=10,
                   headers={"content-type": "application/json"})
    assert_refused(r, protocol)
    assert mock.requests() == []


def test_a_known_caller_still_gets_the_parse_error(gw):
    token = gw.mint()["token"]
    r = httpx.post(gw.url + "/v1/chat/completions", content=b"notjson", timeout=10,
                   headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("request body is not valid JSON: ")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", ["authorization", "x-api-key", "x-goog-api-key"])
def test_a_repeated_credential_header_is_refused(gw, mock, protocol, name):
    token = gw.mint()["token"]
    value = f"Bearer {token}" if name == "authorization" else token
    path, body = REQUESTS[protocol]
    for pair in ([value, "garbage"], ["garbage", value], [value, value]):
        headers = httpx.Headers([(name, v) for v in pair])
        assert_refused(httpx.post(gw.url + path, json=body, headers=headers, timeout=10), protocol)
    assert mock.requests() == []


def test_a_repeated_credential_header_is_refused_on_metrics_and_stats(gw):
    token = gw.mint()["token"]
    twice = httpx.Headers([("authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")])
    once = {"authorization": f"Bearer {token}"}
    for path, status in (("/stats", 200), ("/metrics", 404)):      # 404: no metrics: block
        assert httpx.get(gw.url + path, headers=once, timeout=10).status_code == status
        assert_refused(httpx.get(gw.url + path, headers=twice, timeout=10), "openai")


ALL_NAMES = ["to-openai", "to-anthropic", "to-gemini", "to-bedrock", "to-cohere",
             "m-openai", "m-anthropic", "m-gemini", "m-bedrock", "m-cohere"]


def model_ids(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [m["id"] for m in r.json()["data"]]


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer sk-garbage"}])
def test_the_model_list_needs_a_key(gw, headers):
    assert_refused(httpx.get(gw.url + "/v1/models", headers=headers, timeout=10), "openai")


def test_the_model_list_shows_only_what_the_key_may_use(gw):
    every = gw.mint()["token"]
    assert model_ids(httpx.get(gw.url + "/v1/models", headers={"x-api-key": every}, timeout=10)) == ALL_NAMES
    some = gw.mint(allowed_pools=["to-cohere", "m-openai", "up-anthropic"])["token"]
    r = httpx.get(gw.url + "/v1/models", headers={"authorization": f"Bearer {some}"}, timeout=10)
    assert model_ids(r) == ["to-cohere", "m-openai"]
    none = gw.mint(allowed_pools=[])["token"]
    assert model_ids(httpx.get(gw.url + "/v1/models", headers={"x-api-key": none}, timeout=10)) == []


def test_the_openai_sdk_lists_the_granted_models(gw):
    token = gw.mint(allowed_pools=["to-openai"])["token"]
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0)
    assert [m.id for m in c.models.list()] == ["to-openai"]


def test_pool_health_needs_a_key_granted_that_pool(gw):
    assert httpx.get(gw.url + "/healthz", timeout=10).text == "ok"      # load balancers: open
    for pool in ("to-openai", "no-such-pool"):
        assert_refused(httpx.get(gw.url + "/healthz", params={"pool": pool}, timeout=10), "openai")
    token = gw.mint(allowed_pools=["to-openai"])["token"]
    auth = {"authorization": f"Bearer {token}"}
    r = httpx.get(gw.url + "/healthz", params={"pool": "to-openai"}, headers=auth, timeout=10)
    assert (r.status_code, r.text) == (200, "ok")
    for pool in ("to-cohere", "no-such-pool"):     # not granted: 403 whether or not it exists
        r = httpx.get(gw.url + "/healthz", params={"pool": pool}, headers=auth, timeout=10)
        assert (r.status_code, r.json()) == forbidden("openai", pool)
    every = {"x-api-key": gw.mint()["token"]}
    r = httpx.get(gw.url + "/healthz", params={"pool": "no-such-pool"}, headers=every, timeout=10)
    assert (r.status_code, r.text) == (404, "no pool named 'no-such-pool'")
