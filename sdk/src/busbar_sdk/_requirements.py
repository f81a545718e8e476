"""Checking a plugin's ``requires_dist`` against the running environment (nothing is installed).

A plugin wheel is unpacked and imported, never ``pip install``-ed into the kernel's environment,
so every distribution it requires must already be there: this check names the first thing
missing before any plugin code runs.

Source: issue 4 ("a required distribution that is missing from the environment is a boot error
naming it"); PEP 508 (requirement syntax and markers).
"""
from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["unmet_requirements"]


def unmet_requirements(requires_dist: Iterable[str]) -> list[str]:
    """One reason per requirement the current environment does not satisfy.

    Requirements whose environment marker is false (``; python_version < "3"``, extras-only
    lines) are skipped. Pre-releases satisfy a specifier.

    Returns:
        ``[]`` when all are met; otherwise lines like ``requires distribution 'fastjson>=2', which
        is not installed in the kernel's environment; install it next to busbar (pip install
        'fastjson>=2') or remove the plugin``.
    """
    reasons: list[str] = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            reasons.append(f"requires_dist entry {line!r} is not a PEP 508 requirement; repack the plugin")
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        spec = f"{req.name}{req.specifier}"
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            reasons.append(f"requires distribution {spec!r}, which is not installed in the kernel's environment; "
                           f"install it next to busbar (pip install '{spec}') or remove the plugin")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            reasons.append(f"requires distribution {spec!r}, but the kernel's environment has {req.name} {have}; "
                           f"install a matching version (pip install '{spec}') or a build of the plugin for it")
    return reasons
