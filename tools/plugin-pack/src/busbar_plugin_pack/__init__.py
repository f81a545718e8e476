"""busbar-plugin-pack: the CLI over ``busbar_sdk.artifact`` (no format logic lives here)."""
from __future__ import annotations

from busbar_plugin_pack.cli import main

__all__ = ["main"]
