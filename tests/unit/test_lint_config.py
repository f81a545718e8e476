"""The lint and type-check configuration (pyproject.toml, requirements-lint.txt, .ci/run) holds its line.

mypy runs ``--strict`` over the kernel and the sdk; the per-module relaxations in ``[[tool.mypy.overrides]]``
may only shrink. ``RELAXATIONS`` is their committed count ((module, error code) pairs): a change that adds
one fails here, and a change that removes one must lower the count in the same commit, so the ratchet
never slips back.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELAXATIONS = 13
# Packages that must stay free of relaxations (strict, no per-module exceptions): the sdk and the request path.
STRICT_ONLY = ("busbar_sdk", "busbar.proxy", "busbar.server", "busbar.hooks")


def _mypy() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _pairs() -> list[tuple[str, str]]:
    pairs = []
    for o in _mypy().get("overrides", []):
        mods = [o["module"]] if isinstance(o["module"], str) else o["module"]
        pairs += [(m, code) for m in mods for code in o["disable_error_code"]]
    return pairs


def test_mypy_is_strict_over_kernel_and_sdk_with_no_global_relaxation() -> None:
    cfg = _mypy()
    assert cfg["strict"] is True
    assert cfg["files"] == ["kernel/src/busbar", "sdk/src/busbar_sdk"]
    assert set(cfg) == {"strict", "python_version", "files", "warn_unused_configs", "overrides"}


def test_overrides_only_disable_listed_error_codes() -> None:
    for o in _mypy()["overrides"]:
        assert set(o) == {"module", "disable_error_code"}, o       # no ignore_errors, no allow_* flags
        mods = [o["module"]] if isinstance(o["module"], str) else o["module"]
        assert all("*" not in m for m in mods), o                   # one module each, no wildcards
        assert o["disable_error_code"], o


def test_relaxations_only_shrink() -> None:
    n = len(_pairs())
    assert n <= RELAXATIONS, (f"{n} mypy relaxations in pyproject.toml, more than the committed {RELAXATIONS}: "
                              "type the new code instead of relaxing its module")
    assert n == RELAXATIONS, (f"{n} mypy relaxations left: lower RELAXATIONS in {Path(__file__).name} to {n} "
                              "so they cannot grow back")


def test_strict_only_packages_have_no_relaxation() -> None:
    relaxed = sorted({m for m, _ in _pairs() if any(m == p or m.startswith(p + ".") for p in STRICT_ONLY)})
    assert relaxed == []


def test_lint_tools_are_pinned_and_run_before_the_tests() -> None:
    pins = [ln for ln in (ROOT / "requirements-lint.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    assert {ln.split("==")[0] for ln in pins} >= {"ruff", "mypy"}
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", ln) for ln in pins), pins
    steps = [ln for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.startswith("scripts/")]
    assert steps == ["scripts/setup", "scripts/lint", 'scripts/test "$@"']
