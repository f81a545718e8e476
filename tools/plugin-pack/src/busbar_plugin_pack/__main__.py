"""``python -m busbar_plugin_pack``."""
from __future__ import annotations

from busbar_plugin_pack.cli import main

raise SystemExit(main())
