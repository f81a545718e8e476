"""Wait for an observable condition instead of sleeping a fixed time.

``wait_until(predicate, timeout=5.0, interval=0.02) -> T``: calls ``predicate()`` until it returns a
truthy value and returns that value; raises ``AssertionError`` naming ``what`` after ``timeout``
seconds. Use it where the event has no notification channel a test can await (a metric, the mock's
request journal, a lane state behind an HTTP endpoint).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout: float = 5.0, interval: float = 0.02,
               what: str = "condition") -> T:
    """Poll ``predicate`` every ``interval`` s until truthy (returned) or ``timeout`` s (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
