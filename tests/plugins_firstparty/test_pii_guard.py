"""examples/hooks/pii-guard: a ``prompt: ro`` gate (wired with ``on_error: reject``) that rejects with
451 a request carrying an unredacted SSN-like or card-like number.

Source: docs/hooks.md#what-a-gate-may-answer (reject: the PII-screen primitive), docs/plugins.md#grants,
"What Busbar guarantees when a hook misbehaves" (on_error: reject for security gates).
"""
from __future__ import annotations

import pytest

from tests.plugins_firstparty.support import per_request, prompt_request, request


@pytest.fixture
def guard(load_plugin):
    plugin = load_plugin("pii-guard")
    assert plugin.manifest.needs.prompt == "ro"
    return plugin.open({})


def decide(*messages: tuple[str, str], system: str | None = None) -> dict:
    return per_request("decide", prompt_request(list(messages), system=system), [{"idx": 0, "model": "m"}])


@pytest.mark.parametrize(("text", "what"), [
    ("my SSN is 123-45-6789, can you file my taxes?", "social security number"),
    ("ssn: 078 05 1120", "social security number"),
    ("charge card 4111 1111 1111 1111 exp 12/29", "payment card number"),
    ("card 4242-4242-4242-4242", "payment card number"),
    ("amex 378282246310005 please", "payment card number"),
    ("pay with 5555555555554444", "payment card number"),
])
def test_rejects_with_451_without_echoing_the_number(guard, text, what) -> None:
    reply = guard.call(decide(("user", "hello"), ("assistant", "hi"), ("user", text)))
    assert reply["reject"]["status"] == 451
    message = reply["reject"]["message"]
    assert f"message 3 carries an unredacted {what}" in message
    assert not any(ch.isdigit() for ch in message.replace("message 3", ""))


@pytest.mark.parametrize("text", [
    "my SSN is ***-**-6789", "SSN XXX-XX-6789", "card ending 4242", "card **** **** **** 1111",
    "XXXX-XXXX-XXXX-1111", "order 4111 1111 1111 1112 (not Luhn-valid)", "invalid ssn 000-12-3456",
    "invalid ssn 666-12-3456", "invalid ssn 912-12-3456", "call 555-123-4567", "id 123-45-67890",
    "0000 0000 0000 0000", "version 1.2.3, build 2026-01-15", "",
])
def test_lets_redacted_and_ordinary_text_through(guard, text) -> None:
    assert guard.call(decide(("user", text or "nothing here"))) == {}


def test_screens_the_system_prompt_and_transform_passes(guard) -> None:
    reply = guard.call(decide(("user", "hi"), system="Customer SSN 123-45-6789 on file"))
    assert reply["reject"]["status"] == 451 and "the system prompt" in reply["reject"]["message"]
    transform = per_request("transform", prompt_request([("user", "4111111111111111")]))
    assert guard.call(transform)["reject"]["status"] == 451


def test_without_the_prompt_grant_it_fails_closed(guard) -> None:
    """No prompt text means the gate was wired without prompt: ro: it raises, on_error: reject -> 503."""
    with pytest.raises(PermissionError, match="wire it with prompt: ro"):
        guard.call(per_request("decide", request(), [{"idx": 0}]))


def test_management_and_settings(load_plugin) -> None:
    plugin = load_plugin("pii-guard")
    inst = plugin.open({"status": 403, "detectors": ["card"], "message": "Blocked"})
    assert inst.call(decide(("user", "123-45-6789"))) == {}
    reply = inst.call(decide(("user", "4111 1111 1111 1111")))
    assert reply == {"reject": {"status": 403, "message": "Blocked: message 1 carries an unredacted payment card "
                                                          "number; redact it and retry."}}
    assert inst.call({"op": "future_op"}) == {} and inst.call({"future_key": 1}) == {}
    assert inst.call(per_request("notify", request())) == {}
    assert inst.configure({}, settings_version=5) == {"ack": {"settings_version": 5}}
    with pytest.raises(ValueError, match=r"settings.status"):
        inst.configure({"status": 503}, settings_version=6)
    assert inst.call({"describe": True})["schema"]["properties"]["status"]["default"] == 451
    status = inst.call({"status": True})["status"]
    assert status["settings_version"] == 5
    assert {(m["name"], (m.get("labels") or {}).get("detector")): m["value"] for m in status["metrics"]} == {
        ("pii_guard_screened_total", None): 2, ("pii_guard_rejected_total", "card"): 1}
    with pytest.raises(ValueError, match=r"settings.detectors"):
        plugin.open({"detectors": ["email"]})
