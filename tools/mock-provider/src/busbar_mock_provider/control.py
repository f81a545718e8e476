"""The control API under ``/_mock/`` (JSON in, JSON out).

- ``GET /_mock/script``: pending rules -> ``{"rules": [...]}`` (each with its remaining ``times``)
- ``POST /_mock/script``: append rules (body ``{"rules": [...]}``, see ``faults.py``)
  -> ``{"added": n, "pending": m}``
- ``DELETE /_mock/script``: drop all rules -> ``{"cleared": n}``
- ``GET /_mock/requests``: the request log (``journal.py``) -> ``[{...}, ...]``
- ``DELETE /_mock/requests``: empty it -> ``{"cleared": n}``
- ``GET /_mock/events``: the event log (client disconnects) -> ``[{...}, ...]``
- ``DELETE /_mock/events``: empty it -> ``{"cleared": n}``
- ``POST /_mock/reset``: drop rules, requests and events
  -> ``{"cleared": {"rules": n, "requests": n, "events": n}}``

Errors: 400 ``{"error": "invalid script", "faults": [...]}`` (one line per fault), 404 for an
unknown control path, 405 ``{"error": ..., "allowed": [...]}`` for a wrong method.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from .faults import ScriptError, parse_rules
from .wire import Exchange

if TYPE_CHECKING:
    from .app import MockProvider

__all__ = ["handle_control", "send_json"]

_ALLOWED = {
    "script": ("GET", "POST", "DELETE"),
    "requests": ("GET", "DELETE"),
    "events": ("GET", "DELETE"),
    "reset": ("POST",),
}


async def send_json(
    ex: Exchange, status: int, obj: Any, headers: list[tuple[str, str]] | None = None
) -> None:
    """Send ``obj`` as a complete ``application/json`` answer."""
    body = orjson.dumps(obj)
    hdrs = [("content-type", "application/json"), ("content-length", str(len(body))), *(headers or [])]
    await ex.start(status, hdrs)
    await ex.write(body, False)


async def handle_control(app: MockProvider, ex: Exchange) -> None:
    """Serve one ``/_mock/<name>`` request against the app's script and journal."""
    name = ex.scope["path"][len("/_mock/") :].strip("/")
    method = ex.scope["method"]
    raw = await ex.read_body()
    if name not in _ALLOWED:
        await send_json(
            ex, 404, {"error": f"unknown control path /_mock/{name}", "allowed": sorted(_ALLOWED)}
        )
        return
    if method not in _ALLOWED[name]:
        await send_json(
            ex, 405, {"error": f"{method} not allowed on /_mock/{name}", "allowed": _ALLOWED[name]}
        )
        return
    journal, script = app.journal, app.script
    if name == "script" and method == "POST":
        try:
            rules = parse_rules(orjson.loads(raw), app.fixtures)
        except orjson.JSONDecodeError as exc:
            await send_json(ex, 400, {"error": "invalid script", "faults": [f"body: not JSON ({exc})"]})
            return
        except ScriptError as exc:
            await send_json(ex, 400, {"error": "invalid script", "faults": exc.faults})
            return
        script.add(rules)
        await send_json(ex, 200, {"added": len(rules), "pending": len(script.rules)})
    elif name == "script" and method == "GET":
        await send_json(ex, 200, {"rules": script.snapshot()})
    elif name == "script":
        await send_json(ex, 200, {"cleared": script.clear()})
    elif name == "requests" and method == "GET":
        await send_json(ex, 200, list(journal.requests))
    elif name == "requests":
        await send_json(ex, 200, {"cleared": journal.clear_requests()})
    elif name == "events" and method == "GET":
        await send_json(ex, 200, list(journal.events))
    elif name == "events":
        await send_json(ex, 200, {"cleared": journal.clear_events()})
    else:
        cleared = {
            "rules": script.clear(),
            "requests": journal.clear_requests(),
            "events": journal.clear_events(),
        }
        await send_json(ex, 200, {"cleared": cleared})
