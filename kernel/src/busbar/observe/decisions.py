"""Hook decisions noted on the request record, for the OTLP trace's ``hook <name>`` child spans.

The hook chain calls :func:`note` after each gate it waited for; it costs one attribute read unless
traces are on (:data:`enabled`, set by ``busbar.observe.traces.build_tracer``). A note is appended to
``record.extra["hook_decisions"]`` as ``{"hook", "started", "ended", "verdict"}`` (``perf_counter``
seconds; ``verdict`` is ``decided`` or ``failed: <reason>``; a gate that explained its decision, such
as the AI router, adds its summary: ``decided; order; served_by=model; confidence=0.98; ...``).

Source: docs/operations.md#traces-otlp
"""
from __future__ import annotations

import time
from typing import Any

__all__ = ["enabled", "note"]

enabled = False
"""True while an OTLP exporter is installed."""


def note(call: Any, hook: str, failure: str | None, started: float, detail: str | None = None) -> None:
    """Note one gate's decision on ``call.record`` (no-op unless :data:`enabled`); ``detail``: what
    the gate explained (appended to the verdict)."""
    if not enabled:
        return
    record = getattr(call, "record", None)
    if record is None:
        return
    record.extra.setdefault("hook_decisions", []).append(
        {"hook": hook, "started": started, "ended": time.perf_counter(),
         "verdict": ("decided" if failure is None else f"failed: {failure}") + (f"; {detail}" if detail else "")})
