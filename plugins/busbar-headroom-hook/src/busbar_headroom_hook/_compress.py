"""The pure half of Headroom: a conversation's texts in, compressed texts and a tally out.

Three passes, in this order, each one lossless in meaning or explicit about what it removed:

1. **Whitespace** (every message but the last): ``\\r\\n`` becomes ``\\n``; trailing spaces and tabs
   are stripped from every line; outside fenced code blocks, runs of blank lines collapse to one
   and runs of spaces/tabs *inside* a line collapse to one space (leading indentation is kept:
   it carries structure). Inside fences only trailing whitespace goes.
2. **Repeated blocks** (``dedup_min_chars``): the text is cut into blocks (fenced blocks, and
   paragraphs between blank lines). A block of at least ``dedup_min_chars`` characters that occurs
   again, verbatim, in a *later* message is replaced in the earlier message by
   ``[headroom: repeated verbatim in message N below; K chars omitted here]``. The latest copy is
   the one kept (an earlier copy of the same output is the stale one), so the last message, which
   is never modified, always keeps its content.
3. **Stale long outputs** (``truncate_over_chars``): a fenced block longer than that in a message
   older than the last ``keep_recent`` messages keeps its fences, its first ``keep_head_chars``
   and its last ``keep_tail_chars`` characters (cut at line boundaries) and says what went:
   ``[headroom: N chars of stale output omitted]``. Prose is never truncated.

Nothing here guesses at meaning: no summarization, no model, no token dropping inside prose.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Knobs", "Result", "compress"]

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_INNER_WS = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")
_BLANK_RUN = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Knobs:
    """Compression settings (see the plugin's settings schema)."""

    whitespace: bool = True
    dedup_min_chars: int = 200
    truncate_over_chars: int = 4000
    keep_head_chars: int = 1200
    keep_tail_chars: int = 600
    keep_recent: int = 4


@dataclass
class Result:
    """The compressed texts (same count and order) and per-method character savings."""

    texts: list[str]
    saved: Counter[str] = field(default_factory=Counter)
    deduped: int = 0
    truncated: int = 0


@dataclass
class _Block:
    text: str
    fenced: bool


def _blocks(text: str) -> list[_Block]:
    """Split into fenced blocks and prose runs; ``"".join`` of the texts is ``text`` exactly."""
    out: list[_Block] = []
    lines = text.splitlines(keepends=True)
    prose: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            prose.append(lines[i])
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        while j < len(lines):
            close = _FENCE.match(lines[j])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence) \
                    and not lines[j].strip()[len(close.group(1)):].strip():
                break
            j += 1
        if j >= len(lines):  # unterminated fence: leave the rest as prose, untouched
            prose.extend(lines[i:])
            break
        if prose:
            out.append(_Block("".join(prose), False))
            prose = []
        out.append(_Block("".join(lines[i:j + 1]), True))
        i = j + 1
    if prose:
        out.append(_Block("".join(prose), False))
    return out


def _paragraphs(prose: str) -> list[str]:
    """Prose cut after each blank-line run; ``"".join`` gives ``prose`` back."""
    parts = re.split(r"(\n[ \t]*\n+)", prose)
    out: list[str] = []
    for k in range(0, len(parts), 2):
        piece = parts[k] + (parts[k + 1] if k + 1 < len(parts) else "")
        if piece:
            out.append(piece)
    return out


def _rstrip_lines(text: str) -> str:
    return "\n".join(line.rstrip(" \t") for line in text.split("\n"))


def _squeeze(text: str) -> str:
    text = text.replace("\r\n", "\n")
    out: list[str] = []
    for block in _blocks(text):
        if block.fenced:
            out.append(_rstrip_lines(block.text))
        else:
            prose = _rstrip_lines(block.text)
            prose = _INNER_WS.sub(" ", prose)
            prose = _BLANK_RUN.sub("\n\n", prose)
            if out and prose.startswith("\n\n"):  # after a fence (which ends its line): one blank line
                prose = prose[1:]
            out.append(prose)
    return "".join(out)


def _units(text: str) -> list[tuple[str, bool]]:
    """Dedup units: fenced blocks whole, prose by paragraph; ``(text, fenced)``."""
    units: list[tuple[str, bool]] = []
    for block in _blocks(text):
        if block.fenced:
            units.append((block.text, True))
        else:
            units.extend((p, False) for p in _paragraphs(block.text))
    return units


def _key(unit: str) -> str:
    """Identity of a dedup unit: its text without outer whitespace and line-end whitespace (so the
    untouched last message matches a whitespace-normalized earlier copy)."""
    return _rstrip_lines(unit.replace("\r\n", "\n")).strip()


def _truncate_fenced(block: str, knobs: Knobs) -> tuple[str, int]:
    lines = block.splitlines(keepends=True)
    opening, closing, body = lines[0], lines[-1], "".join(lines[1:-1])
    if len(body) <= knobs.truncate_over_chars:
        return block, 0
    head_end = body.rfind("\n", 0, knobs.keep_head_chars)
    head = body[:head_end + 1] if head_end > 0 else body[:knobs.keep_head_chars]
    tail_start = body.find("\n", len(body) - knobs.keep_tail_chars)
    tail = body[tail_start + 1:] if 0 <= tail_start < len(body) - 1 else body[len(body) - knobs.keep_tail_chars:]
    omitted = len(body) - len(head) - len(tail)
    if omitted <= 0:
        return block, 0
    if not head.endswith("\n"):
        head += "\n"
    if tail and not tail.endswith("\n"):
        tail += "\n"
    marker = f"[headroom: {omitted} chars of stale output omitted]\n"
    new = opening + head + marker + tail + closing
    return (new, len(block) - len(new)) if len(new) < len(block) else (block, 0)


def compress(texts: list[str], knobs: Knobs) -> Result:
    """Compress a conversation's message texts. The last text is returned unchanged.

    Returns:
        a :class:`Result` whose ``texts`` has the same length and order as ``texts``.
    """
    result = Result(texts=list(texts))
    n = len(texts)
    if n < 2:
        return result
    work = list(texts)
    if knobs.whitespace:
        for i in range(n - 1):
            squeezed = _squeeze(work[i])
            if squeezed != work[i] and squeezed.strip():
                result.saved["whitespace"] += len(work[i]) - len(squeezed)
                work[i] = squeezed
    if knobs.dedup_min_chars > 0:
        last_seen: dict[str, int] = {}
        per_message = [_units(t) for t in work]
        for i, units in enumerate(per_message):
            for unit, _fenced in units:
                if len(unit) >= knobs.dedup_min_chars:
                    k = _key(unit)
                    if len(k) >= knobs.dedup_min_chars:
                        last_seen[k] = i
        for i in range(n - 1):
            changed = False
            pieces: list[str] = []
            for unit, _fenced in per_message[i]:
                k = _key(unit) if len(unit) >= knobs.dedup_min_chars else ""
                later = last_seen.get(k, i)
                marker = f"[headroom: repeated verbatim in message {later + 1} below; {len(k)} chars omitted here]"
                if len(k) >= knobs.dedup_min_chars and later > i and len(k) > len(marker):
                    lead = unit[:len(unit) - len(unit.lstrip())]
                    trail = unit[len(unit.rstrip()):]
                    pieces.append(lead + marker + trail)
                    result.saved["dedup"] += len(unit) - len(pieces[-1])
                    result.deduped += 1
                    changed = True
                else:
                    pieces.append(unit)
            if changed:
                work[i] = "".join(pieces)
    if knobs.truncate_over_chars > 0:
        stale = max(0, n - max(1, knobs.keep_recent))
        for i in range(min(stale, n - 1)):
            pieces = []
            changed = False
            for block in _blocks(work[i]):
                if block.fenced:
                    new, saved = _truncate_fenced(block.text, knobs)
                    if saved:
                        result.saved["truncate"] += saved
                        result.truncated += 1
                        changed = True
                    pieces.append(new)
                else:
                    pieces.append(block.text)
            if changed:
                work[i] = "".join(pieces)
    result.texts = work
    return result
