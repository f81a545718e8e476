"""The hook wire contract: the kernel (projection builder, reply parser) and the sdk (typed models)
read one definition, ``busbar_sdk.wire``, and agree on every arm, every limit and unknown fields.

Each wire reply below goes through both sides: the kernel's ``read_decide``/``read_transform`` and
the sdk's ``parse_hook_reply``; each sdk arm is built, serialized with ``to_wire`` and read back by
the kernel. A projection built by the kernel parses into the sdk's models field for field.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from busbar.hooks import projection, reply
from busbar.hooks.reply import Abstain, Arms, Reject, ReplyError, Rewrite, read_decide, read_transform
from busbar_sdk import PayloadError, wire
from busbar_sdk import models as sdk
from pydantic import ValidationError

KNOWN = frozenset({0, 1, 2})
LONG = "x" * 301


def kernel_verdict(raw: Any, *, transform: bool = False) -> tuple[Any, ...]:
    try:
        arm = read_transform(raw, "rw", 1 << 20) if transform else read_decide(raw, KNOWN, "rw")
    except ReplyError:
        return ("garbage",)
    if isinstance(arm, Abstain):
        return ("abstain",)
    if isinstance(arm, Reject):
        return ("reject", arm.status, arm.message)
    if isinstance(arm, Rewrite):
        return ("rewrite", len(arm.messages), None if arm.tools is None else len(arm.tools))
    assert isinstance(arm, Arms)
    if arm.restrict is not None:
        return ("restrict", tuple(sorted(arm.restrict)))
    return ("order", arm.order)


def sdk_verdict(raw: Any) -> tuple[Any, ...]:
    try:
        arm = sdk.parse_hook_reply(raw)
    except PayloadError:
        return ("garbage",)
    if isinstance(arm, sdk.Abstain):
        return ("abstain",)
    if isinstance(arm, sdk.Reject):
        return ("reject", arm.status, arm.message)
    if isinstance(arm, sdk.Rewrite):
        return ("rewrite", len(arm.messages), None if arm.tools is None else len(arm.tools))
    if isinstance(arm, sdk.Restrict):
        return ("restrict", tuple(sorted(arm.tags_any)))
    assert isinstance(arm, sdk.Order)
    return ("order", arm.order)


DEFAULT = wire.DEFAULT_REJECT_MESSAGE
TAGS64 = [f"t{i}" for i in range(64)]
TAGS65 = [f"t{i}" for i in range(65)]
MSG = [{"role": "user", "content": "hi"}]

# (wire reply, expected verdict on both sides); unknown fields ride along in many rows.
DECIDE_CASES: list[tuple[str, Any, tuple[Any, ...]]] = [
    ("empty", {}, ("abstain",)),
    ("abstain", {"abstain": True}, ("abstain",)),
    ("abstain-beats-order", {"abstain": True, "order": [0]}, ("abstain",)),
    ("unknown-top-level", {"future_arm": {"x": 1}}, ("abstain",)),
    ("reject", {"reject": {"status": 451, "message": "no"}}, ("reject", 451, "no")),
    ("reject-unknown-field", {"reject": {"status": 451, "message": "no", "retry": 3}}, ("reject", 451, "no")),
    ("reject-400", {"reject": {"status": 400}}, ("reject", 400, DEFAULT)),
    ("reject-499", {"reject": {"status": 499}}, ("reject", 499, DEFAULT)),
    ("reject-200", {"reject": {"status": 200}}, ("reject", 403, DEFAULT)),
    ("reject-399", {"reject": {"status": 399}}, ("reject", 403, DEFAULT)),
    ("reject-500", {"reject": {"status": 500}}, ("reject", 403, DEFAULT)),
    ("reject-bool-status", {"reject": {"status": True}}, ("reject", 403, DEFAULT)),
    ("reject-str-status", {"reject": {"status": "451"}}, ("reject", 403, DEFAULT)),
    ("reject-true", {"reject": True}, ("reject", 403, DEFAULT)),
    ("reject-list", {"reject": ["x"]}, ("reject", 403, DEFAULT)),
    ("reject-false", {"reject": False}, ("abstain",)),
    ("reject-null", {"reject": None, "order": [1]}, ("order", (1,))),
    ("reject-sanitized", {"reject": {"message": " a\u202eb\x00c\u200b "}}, ("reject", 403, "abc")),
    ("reject-blank", {"reject": {"message": "\u200b "}}, ("reject", 403, DEFAULT)),
    ("reject-capped", {"reject": {"message": LONG}}, ("reject", 403, "x" * 300)),
    ("reject-beats-all", {"reject": {}, "restrict": {"tags_any": ["a"]}, "order": [0]}, ("reject", 403, DEFAULT)),
    ("restrict", {"restrict": {"tags_any": ["b", "a"]}}, ("restrict", ("a", "b"))),
    ("restrict-unknown-field", {"restrict": {"tags_any": ["a"], "mode": "all"}}, ("restrict", ("a",))),
    ("restrict-64", {"restrict": {"tags_any": TAGS64}}, ("restrict", tuple(sorted(TAGS64)))),
    ("restrict-65", {"restrict": {"tags_any": TAGS65}}, ("garbage",)),
    ("restrict-0", {"restrict": {"tags_any": []}}, ("garbage",)),
    ("restrict-empty-tag", {"restrict": {"tags_any": ["a", ""]}}, ("garbage",)),
    ("restrict-int-tag", {"restrict": {"tags_any": [1]}}, ("garbage",)),
    ("restrict-not-object", {"restrict": ["a"]}, ("garbage",)),
    ("order", {"order": [2, 0]}, ("order", (2, 0))),
    ("order-dupes-and-junk", {"order": [1, "0", 1, True, 2]}, ("order", (1, 2))),
    ("order-empty", {"order": []}, ("abstain",)),
    ("order-not-list", {"order": "0,1"}, ("garbage",)),
    ("not-an-object", ["order"], ("garbage",)),
]


@pytest.mark.parametrize(("raw", "want"), [c[1:] for c in DECIDE_CASES], ids=[c[0] for c in DECIDE_CASES])
def test_both_sides_read_every_decide_reply_the_same(raw: Any, want: tuple[Any, ...]) -> None:
    assert kernel_verdict(raw) == want
    assert sdk_verdict(raw) == want


TRANSFORM_CASES: list[tuple[str, Any, tuple[Any, ...]]] = [
    ("rewrite", {"rewrite": {"messages": MSG}}, ("rewrite", 1, None)),
    ("rewrite-tools", {"rewrite": {"messages": MSG, "tools": [{"name": "f", "input_schema": {"type": "object"}}]}},
     ("rewrite", 1, 1)),
    ("rewrite-unknown-fields", {"rewrite": {"messages": [{"role": "user", "content": "hi", "cache": 1}],
                                            "model": "x"}, "trace": "t"}, ("rewrite", 1, None)),
    ("rewrite-no-messages", {"rewrite": {"messages": []}}, ("garbage",)),
    ("rewrite-not-object", {"rewrite": "hi"}, ("garbage",)),
    ("reject-beats-rewrite", {"reject": {"status": 429}, "rewrite": {"messages": MSG}}, ("reject", 429, DEFAULT)),
    ("no-arm", {"future": 1}, ("abstain",)),
]


@pytest.mark.parametrize(("raw", "want"), [c[1:] for c in TRANSFORM_CASES], ids=[c[0] for c in TRANSFORM_CASES])
def test_both_sides_read_every_transform_reply_the_same(raw: Any, want: tuple[Any, ...]) -> None:
    assert kernel_verdict(raw, transform=True) == want
    assert sdk_verdict(raw) == want


# --------------------------------------------------------------- sdk-built arms, read by the kernel

SDK_ARMS: list[tuple[str, Any, tuple[Any, ...]]] = [
    ("abstain", sdk.Abstain(), ("abstain",)),
    ("reject-default", sdk.Reject(), ("reject", 403, DEFAULT)),
    ("reject-400", sdk.Reject(status=400, message="m"), ("reject", 400, "m")),
    ("reject-499-300-chars", sdk.Reject(status=499, message="y" * 300), ("reject", 499, "y" * 300)),
    ("restrict-64", sdk.Restrict(tags_any=TAGS64), ("restrict", tuple(sorted(TAGS64)))),
    ("order", sdk.Order(order=[2, 1, 0]), ("order", (2, 1, 0))),
]


@pytest.mark.parametrize(("arm", "want"), [c[1:] for c in SDK_ARMS], ids=[c[0] for c in SDK_ARMS])
def test_every_sdk_arm_round_trips_through_the_kernel(arm: Any, want: tuple[Any, ...]) -> None:
    raw = arm.to_wire()
    assert kernel_verdict(raw) == want
    assert sdk_verdict(raw) == want


def test_an_sdk_rewrite_round_trips_through_the_kernel() -> None:
    arm = sdk.Rewrite(messages=[sdk.BodyMessage(role="user", content="short")],
                      tools=[{"name": "f", "input_schema": {"type": "object"}}])
    assert arm.to_wire() == {"rewrite": {"messages": [{"role": "user", "content": "short"}],
                                         "tools": [{"name": "f", "input_schema": {"type": "object"}}]}}
    assert kernel_verdict(arm.to_wire(), transform=True) == ("rewrite", 1, 1)


@pytest.mark.parametrize(("build", "error"), [
    (lambda: sdk.Restrict(tags_any=TAGS65), "tags_any holds 65 tags; the limit is 64"),
    (lambda: sdk.Restrict(tags_any=[]), "tags_any must hold at least one non-empty tag"),
    (lambda: sdk.Reject(status=200), "Input should be greater than or equal to 400"),
    (lambda: sdk.Reject(status=500), "Input should be less than or equal to 499"),
    (lambda: sdk.Reject(status="451"), "Input should be a valid integer"),
    (lambda: sdk.Reject(message=LONG), "String should have at most 300 characters"),
    (lambda: sdk.Reject(message=""), "String should have at least 1 character"),
    (lambda: sdk.Rewrite(messages=[]), "Tuple should have at least 1 item after validation, not 0"),
    (lambda: sdk.Reject(stauts=451), "Extra inputs are not permitted"),
], ids=["restrict-65", "restrict-0", "reject-200", "reject-500", "reject-str", "reject-301-chars",
        "reject-empty-message", "rewrite-0", "typo-keyword"])
def test_the_sdk_refuses_to_build_what_the_kernel_would_not_honour(build: Any, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        build()


def test_one_definition_of_the_limits() -> None:
    assert (wire.MAX_RESTRICT_TAGS, wire.REJECT_STATUS_MIN, wire.REJECT_STATUS_MAX, wire.DEFAULT_REJECT_STATUS,
            wire.MAX_REJECT_MESSAGE_CHARS) == (64, 400, 499, 403, 300)
    assert wire.DEFAULT_REJECT_MESSAGE == "Request rejected by the routing policy."
    assert reply.DEFAULT_REJECT_MESSAGE is wire.DEFAULT_REJECT_MESSAGE is sdk.DEFAULT_REJECT_MESSAGE
    assert (reply.MAX_TAGS, reply.MAX_MESSAGE_CHARS) == (wire.MAX_RESTRICT_TAGS, wire.MAX_REJECT_MESSAGE_CHARS)
    assert sdk.MANAGEMENT_KEYS is wire.MANAGEMENT_KEYS == ("configure", "describe", "status")
    assert projection.REDACTED_REASONING is wire.REDACTED_REASONING == "[busbar:redacted_reasoning]"
    assert projection.UNBOUNDED_PERMITS == wire.UNBOUNDED_PERMITS == 2**31 - 1


# ------------------------------------------------------------------ the projection, read by the sdk

def test_the_sdk_models_declare_exactly_the_wire_fields() -> None:
    assert tuple(sdk.RequestProjection.model_fields) == wire.REQUEST_FIELDS
    assert tuple(sdk.Candidate.model_fields) == wire.CANDIDATE_FIELDS
    assert tuple(sdk.Stage.model_fields) == wire.STAGE_FIELDS
    assert tuple(sdk.Reject.model_fields) == wire.REJECT_FIELDS
    assert tuple(sdk.Restrict.model_fields) == wire.RESTRICT_FIELDS
    assert tuple(sdk.Rewrite.model_fields) == wire.REWRITE_FIELDS


def _in_wire_order(keys: list[str], fields: tuple[str, ...]) -> bool:
    return set(keys) <= set(fields) and keys == sorted(keys, key=fields.index)


def test_a_kernel_projection_parses_field_for_field_into_the_sdk_models() -> None:
    lane = SimpleNamespace(name="small", provider=SimpleNamespace(name="acme"), max_concurrent=None, inflight=3,
                           latency_ms=12.3456)
    member = SimpleNamespace(index=1, lane=lane, weight=2, context_max=8000, tier="fast", tags=["eu", "baa"])
    cands = projection.candidate_views([member], {1: 0.75})
    req = projection.shape_view((2, True, 40, 256), request_id="r1", pool="chat", ingress="openai", stream=False)
    req["messages"] = [{"role": "user", "text": "hi"}]
    req["user"] = {"key_id": "k1"}
    stage = projection.stage_view("attempt", model="small", attempt_number=1, status=None)
    assert _in_wire_order(list(req), wire.REQUEST_FIELDS)
    assert _in_wire_order(list(cands[0]), wire.CANDIDATE_FIELDS)
    assert _in_wire_order(list(stage), wire.STAGE_FIELDS)
    payload = {"op": wire.OP_NOTIFY, "request": req, "candidates": cands, "stage": stage,
               "future_member": {"x": 1}}                     # an unknown member: ignored
    msg = sdk.parse_hook_message(payload)
    assert isinstance(msg, sdk.NotifyMessage)
    assert msg.request.model_dump(mode="json", exclude_none=True) == req
    c = msg.candidates[0]
    assert (c.idx, c.model, c.provider, c.weight, c.context_max, c.tier, c.tags, c.cost_per_mtok, c.latency_ms,
            c.available_concurrency) == (1, "small", "acme", 2, 8000, "fast", ("eu", "baa"), 0.75, 12.346,
                                         wire.UNBOUNDED_PERMITS - 3)
    assert msg.stage is not None and msg.stage.model_dump(exclude_none=True) == {
        "at": "attempt", "model": "small", "attempt_number": 1}
    signal = sdk.parse_hook_message({"op": "decide", "candidates": [{"idx": 0, "gpu_free": 0.5}]})
    assert signal is not None and signal.candidates[0].gpu_free == 0.5   # type: ignore[union-attr]
    assert sdk.parse_hook_message({"op": "future-op"}) is None


@pytest.mark.parametrize("order", [
    [True, 1], [1.0, 2], [2, 2, 1, 2], [-1, 99, 0], [], [None, "1", [1]], [1 << 70, 0], list(range(5000)) + [0],
    "0", {"0": 1}, None, 3, False,
])
def test_the_lone_order_fast_path_reads_as_the_full_path(order: Any) -> None:
    # {"order": ...} alone takes read_decide's fast path; with a neutral second key, the full path
    def read(raw: dict[str, Any]) -> Any:
        try:
            return read_decide(raw, KNOWN, "no")
        except ReplyError as e:
            return ("error", str(e), e.reason)
    assert read({"order": order}) == read({"order": order, "abstain": False})
