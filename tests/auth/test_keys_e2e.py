"""Minted virtual keys through the real data plane on a real socket, with the official SDKs.

A key bound in the store and signed with the gateway's keyring is accepted by every SDK; the same
token is refused with the native shape once the key expires, is revoked, disabled, rotated or
deleted; ``allowed_pools`` answers 403 naming the pool. Keys are written into the gateway's store
by tests/auth/inproc.py (what ``POST /api/v1/admin/keys`` does).
"""
from __future__ import annotations

import dataclasses
import time

import anthropic
import cohere
import httpx
import openai
import pytest
from busbar.auth.tokens import mint
from google import genai
from google.genai import types as genai_types

from tests.auth.conftest import PROTOCOLS, config
from tests.auth.shapes import assert_refused, forbidden, post
from tests.support.waiting import wait_until


@pytest.fixture(scope="module")
def gw(inproc_factory, mock):
    return inproc_factory(config(), mock.url)


def test_openai_sdk_with_a_minted_key(gw):
    _, token = gw.mint()
    c = openai.OpenAI(base_url=gw.url + "/v1", api_key=token, max_retries=0)
    r = c.chat.completions.create(model="to-openai", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content


def test_anthropic_sdk_with_a_minted_key(gw):
    _, token = gw.mint()
    c = anthropic.Anthropic(base_url=gw.url, api_key=token, max_retries=0)
    m = c.messages.create(model="to-anthropic", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert m.content[0].type == "text"


def test_genai_sdk_with_a_minted_key(gw):
    _, token = gw.mint()
    c = genai.Client(api_key=token, http_options=genai_types.HttpOptions(
        base_url=gw.url, retry_options=genai_types.HttpRetryOptions(attempts=1)))
    assert c.models.generate_content(model="to-gemini", contents="hi").text


def test_cohere_sdk_with_a_minted_key(gw):
    _, token = gw.mint()
    c = cohere.ClientV2(api_key=token, base_url=gw.url)
    r = c.chat(model="to-cohere", messages=[{"role": "user", "content": "hi"}], request_options={"max_retries": 0})
    assert r.message.content[0].text


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("header", ["authorization", "x-api-key", "x-goog-api-key"])
def test_every_header_carries_the_key_on_every_protocol(gw, protocol, header):
    _, token = gw.mint()
    value = f"Bearer {token}" if header == "authorization" else token
    assert post(gw.url, protocol, {header: value}).status_code == 200


def test_bearer_wins_over_x_api_key(gw):
    _, token = gw.mint()
    assert post(gw.url, "openai", {"authorization": f"Bearer {token}", "x-api-key": "garbage"}).status_code == 200
    assert_refused(post(gw.url, "openai", {"authorization": "Bearer garbage", "x-api-key": token}), "openai")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_revoked_key_is_refused_natively(gw, protocol):
    key_id, token = gw.mint()
    assert post(gw.url, protocol, {"x-api-key": token}).status_code == 200
    gw.revoke(key_id)
    assert_refused(post(gw.url, protocol, {"x-api-key": token}), protocol)


def test_revocation_through_the_store_is_enforced_within_a_second(gw):
    key_id, token = gw.mint()
    assert post(gw.url, "openai", {"x-api-key": token}).status_code == 200
    t0 = time.monotonic()
    gw.run(gw.verifier.keysync.store.add_denylist(key_id, "test", int(time.time())))   # no explicit sync
    wait_until(lambda: post(gw.url, "openai", {"x-api-key": token}).status_code == 401, timeout=1.0)
    assert time.monotonic() - t0 < 1.0


def test_expired_token_is_refused_although_the_verdict_was_cached(gw):
    now = int(time.time())
    key_id, _ = gw.mint()
    token = mint(gw.gw.signing, key_id, now + 2)
    assert post(gw.url, "anthropic", {"x-api-key": token}).status_code == 200      # verdict cached
    wait_until(lambda: int(time.time()) >= now + 2, timeout=3.0)
    assert_refused(post(gw.url, "anthropic", {"x-api-key": token}), "anthropic")


def _update(gw, key_id: str, **changes):
    key = gw.run(gw.verifier.keysync.store.get_key(key_id))
    gw.put(dataclasses.replace(key, **changes))


@pytest.mark.parametrize("change", [{"enabled": False}, {"generation": 1}, {"expires_at": 1}])
def test_disabled_rotated_or_expired_binding_refuses_the_old_token(gw, change):
    key_id, token = gw.mint()
    assert post(gw.url, "gemini", {"x-goog-api-key": token}).status_code == 200
    _update(gw, key_id, **change)
    assert_refused(post(gw.url, "gemini", {"x-goog-api-key": token}), "gemini")


def test_a_rotated_key_accepts_its_new_generation(gw):
    key_id, _ = gw.mint()
    _update(gw, key_id, generation=1)
    token = mint(gw.gw.signing, key_id, int(time.time()) + 60, 1)
    assert post(gw.url, "cohere", {"authorization": f"Bearer {token}"}).status_code == 200


def test_deleted_key_is_refused(gw):
    key_id, token = gw.mint()
    gw.run(gw.verifier.keysync.store.delete_key(key_id, int(time.time())))
    gw.run(gw.verifier.keysync.sync())
    assert_refused(post(gw.url, "bedrock", {"authorization": f"Bearer {token}"}), "bedrock")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_allowed_pools_refuses_other_pools_with_403_naming_the_pool(gw, protocol):
    _, token = gw.mint(allowed_pools=["to-openai"])
    r = post(gw.url, protocol, {"x-api-key": token})
    if protocol == "openai":
        assert r.status_code == 200
    else:
        assert (r.status_code, r.json()) == forbidden(protocol, f"to-{protocol}")


def test_empty_allowed_pools_is_no_pool(gw):
    _, token = gw.mint(allowed_pools=[])
    assert (lambda r: (r.status_code, r.json()))(post(gw.url, "openai", {"x-api-key": token})) == \
        forbidden("openai", "to-openai")


def test_identity_reaches_the_request(gw):
    key_id, token = gw.mint(group=None, labels={"team": "growth"})
    ident = gw.run(gw.verifier.identify(token, int(time.time())))
    assert ident is not None
    assert (ident.principal, ident.module, ident.group, ident.allowed_pools, ident.labels, ident.kind) == \
        (key_id, "keys", None, None, {"team": "growth"}, "key")


@pytest.mark.parametrize(("allowed", "status"), [(["up-anthropic"], 200), (["to-anthropic"], 403), (None, 403)])
def test_an_adhoc_route_counts_as_its_provider(gw, allowed, status):
    _, token = gw.mint(allowed_pools=allowed)
    r = httpx.post(gw.url + "/up-anthropic/claude-x/v1/messages", headers={"x-api-key": token}, timeout=10,
                   json={"max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    if status == 200:
        assert r.status_code == 200, r.text
    else:
        assert (r.status_code, r.json()) == forbidden("anthropic", "up-anthropic")
