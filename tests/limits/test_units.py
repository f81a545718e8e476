"""Operation units on the ledger (docs/limits.md#operation-units): priced by the per-operation rates,
charged to budgets, never counted as tokens, flushed and seeded as ledger entries of their own."""
from __future__ import annotations

from busbar.config.load import load_config_text
from busbar.ir.ops import OpUsage
from busbar.limits.cost import RateCard, is_unit_key, micros, split_unit, unit_key
from busbar.limits.engine import Limiter, Ticket, Worst
from busbar.limits.tree import GroupTree
from busbar.limits.units import unit_counts, unit_entries
from busbar_sdk.store import TierTokens, UsageDelta, UsageLedger

CONFIG = """
providers:
  oa: { protocol: openai, base_url: "http://127.0.0.1:9", api_key: { env: K } }
models:
  whisper: { provider: oa, operations: [audio] }
  img: { provider: oa, operations: [images] }
pools:
  stt: { members: [ { model: whisper } ] }
rate_card:
  whisper: { input_utok: 2.0, per_audio_second_utok: 0.0015, per_character_utok: 15 }
  img: { per_image_utok: 40000 }
groups:
  g: { limits: [ { budget: 100, per: day }, { tokens: 10, per: day } ] }
"""


class Flusher:
    def __init__(self) -> None:
        self.items: list[tuple[str, int, UsageDelta]] = []

    def add_usage(self, bucket: str, start: int, delta: UsageDelta) -> None:
        self.items.append((bucket, start, delta))


def _limiter() -> tuple[Limiter, RateCard, Flusher]:
    cfg = load_config_text(CONFIG, {"K": "k"}).config
    card = RateCard(cfg.rate_card, cfg.per_request_fee)
    flusher = Flusher()
    return Limiter(GroupTree(cfg.groups), card, flusher=flusher, clock=lambda: 1_800_000_000.0), card, flusher


def test_unit_keys_round_trip_and_leave_other_names_alone():
    assert unit_key("whisper", "audio_ms") == "whisper#audio_ms"
    assert split_unit("whisper#audio_ms") == ("whisper", "audio_ms")
    assert split_unit("oa/model#x") == ("oa/model#x", None)
    assert (is_unit_key("img#images"), is_unit_key("img")) == (True, False)


def test_usage_becomes_ledger_units_rounded_up():
    assert unit_counts(OpUsage("audio", audio_seconds=2.0004)) == {"audio_ms": 2001}
    assert unit_counts(OpUsage("images", images=3, image_size="1024x1024")) == {"images": 3}
    assert unit_counts(OpUsage("embeddings", input_tokens=12)) == {}
    assert unit_entries("img", OpUsage("images", images=2)) == {"img#images": TierTokens(2)}


def test_entries_are_priced_by_their_unit_rate_in_integer_pico_units():
    _, card, _ = _limiter()
    assert card.entry_pico("img#images", TierTokens(3)) == 120_000 * 1_000_000
    # 2 001 ms × 0.0015 µ/s = 0.0030015 µ: 3 001.5 pico, rounded up
    assert card.entry_pico("whisper#audio_ms", TierTokens(2001)) == 3002
    assert card.entry_pico("whisper#characters", TierTokens(11)) == 165 * 1_000_000
    assert card.entry_pico("whisper", TierTokens(5)) == 10 * 1_000_000         # tokens at input_utok
    assert card.entry_pico("img#search_units", TierTokens(4)) == 0               # not priced: 0
    assert card.ledger_pico({"whisper": TierTokens(5), "whisper#characters": TierTokens(2)}, 0) == 40 * 1_000_000


def test_settled_units_are_charged_to_budgets_but_are_not_tokens():
    lim, _, flusher = _limiter()
    t = lim.admit("g", "stt", Worst(0, 0))
    assert isinstance(t, Ticket)
    lim.settle(t, True, "whisper", TierTokens(5), {"whisper#characters": TierTokens(4)})
    day = lim.current["group:g@day"]
    assert (day.tokens, micros(day.spend)) == (5, 10 + 60)
    assert lim.drain() == 1
    assert flusher.items[0][2].models == {"whisper": TierTokens(5), "whisper#characters": TierTokens(4)}
    fresh, _, _ = _limiter()               # another node seeds the flushed ledger: same spend, same tokens
    fresh.seed("group:g@day", day.start, UsageLedger(1, 1, flusher.items[0][2].models))
    seeded = fresh.current["group:g@day"]
    assert (seeded.tokens, micros(seeded.spend)) == (5, 70)


def test_a_failed_request_is_charged_no_units():
    lim, _, flusher = _limiter()
    t = lim.admit("g", "stt", Worst(0, 0))
    assert isinstance(t, Ticket)
    lim.settle(t, False, None, None, None)
    assert (lim.current["group:g@day"].spend, lim.drain(), flusher.items[0][2].models) == (0, 1, {})
