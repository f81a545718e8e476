"""Route commands: ``busbar route --dry-run`` and ``busbar hooks test|calibrate``.

Module map: ``session`` (a booted gateway without a listener; one request through a pool's gates),
``scoring`` (accuracy, confusion, reliability bins, ECE, latency percentiles), ``commands`` (argument
parsing and the printed reports). Dispatched from ``busbar.cli``.

Source: docs/router.md#try-a-route-before-it-goes-live.
"""
from __future__ import annotations

from busbar.routecli.commands import hooks_main, route_main

__all__ = ["hooks_main", "route_main"]
