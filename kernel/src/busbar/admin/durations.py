"""Duration strings of the admin API (``expires_in``): ``"2s"``, ``"30m"``, ``"12h"``, ``"7d"``, ``"2w"``.

``parse_duration(text) -> int`` seconds: a positive integer followed by one unit (``s`` seconds,
``m`` minutes, ``h`` hours, ``d`` days, ``w`` weeks). Raises ``ValueError`` with a message that says
the accepted form.
"""
from __future__ import annotations

import re

__all__ = ["MAX_SECONDS", "parse_duration"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_FORM = re.compile(r"^([1-9][0-9]{0,9})([smhdw])$")
#: The longest lifetime accepted (10 years), so an expiry always fits the token and the store.
MAX_SECONDS = 10 * 365 * 86400


def parse_duration(text: str) -> int:
    """Seconds in ``text``; raises ``ValueError`` for anything but ``<n><s|m|h|d|w>`` within 10 years."""
    m = _FORM.match(text.strip())
    if m is None:
        raise ValueError(f"'{text}' is not a duration; write a positive whole number and one unit: "
                         f"s, m, h, d or w (e.g. \"30m\", \"7d\")")
    seconds = int(m.group(1)) * _UNITS[m.group(2)]
    if seconds > MAX_SECONDS:
        raise ValueError(f"'{text}' is longer than the 10-year maximum")
    return seconds
