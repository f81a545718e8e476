"""Serve the smart router out of process: ``python -m smart_router.sidecar [--port 8787]``.

A thin wrapper over :mod:`busbar_sdk.sidecar` (same as ``python -m busbar_sdk.sidecar
smart_router:plugin``): the same class, the same decisions, behind ``busbar-webrequest-hook``.
"""
from __future__ import annotations

import sys

from busbar_sdk.sidecar import main as sidecar_main


def main(argv: list[str] | None = None) -> int:
    return sidecar_main(["smart_router:plugin", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
