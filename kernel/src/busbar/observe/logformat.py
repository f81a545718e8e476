"""Log line formats: ``text`` (readable, the default) and ``json`` (one JSON object per line).

``configure(level, fmt)`` installs one stderr handler on the root logger. In ``json`` every line is
``{"ts": <ISO-8601 UTC>, "level": "info", "logger": "busbar.access", "msg": "...", ...fields}``;
a record that carries structured fields (``extra={"fields": {...}}``, e.g. the access log) has them
merged at the top level (and ``extra={"json_msg": "access"}`` replaces ``msg``). A traceback goes
under ``"exc"``. In ``text`` the line is ``<time> <LEVEL> <logger>: <msg>`` and the fields are
already part of ``msg``.

Source: docs/operations.md#log-lines
"""
from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import orjson

__all__ = ["FORMATS", "JsonFormatter", "configure"]

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LEVEL_NAMES = {"WARNING": "warn", "CRITICAL": "critical"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": _LEVEL_NAMES.get(record.levelname, record.levelname.lower()),
            "logger": record.name,
            "msg": getattr(record, "json_msg", None) or record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure(level: str, fmt: str = "text") -> None:
    """Log to stderr at ``level`` (a ``logging`` level name) in ``fmt`` (``text`` or ``json``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
