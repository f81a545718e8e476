"""The hooks package sees the gateway only through ``busbar.proxy.context.GatewayContext``, for typing.

At run time ``busbar.hooks`` never imports the gateway (nor the Protocol module), and the gateway
imports ``busbar.hooks`` at module level: no function-local import is left to break a cycle.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import busbar.proxy.gateway

GATEWAY_SRC = Path(busbar.proxy.gateway.__file__)


def _loaded_after(stmt: str) -> set[str]:
    code = f"import sys\n{stmt}\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('busbar.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_hooks_loads_neither_the_gateway_nor_the_context_protocol() -> None:
    loaded = _loaded_after("import busbar.hooks")
    assert "busbar.hooks.chain" in loaded
    assert "busbar.proxy.gateway" not in loaded
    assert "busbar.proxy.context" not in loaded


def test_gateway_imports_hooks_at_module_level_only() -> None:
    tree = ast.parse(GATEWAY_SRC.read_text())
    top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "busbar.hooks" in top
    nested = [n.module for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if isinstance(n, ast.ImportFrom)]
    assert [m for m in nested if m and m.startswith("busbar.hooks")] == []
