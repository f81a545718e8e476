"""Load providers.yaml + config.yaml: interpolate, parse, type, validate, merge — or fail with every fault.

``load_config(config_path, providers_path=None, env=os.environ) -> LoadedConfig`` is the exact
pipeline of a boot and of ``busbar --validate`` (zero side effects: no socket, no file written,
no plugin imported). Raises ``ConfigError`` carrying one line per fault.

Path resolution (seeds 001 "Environment variables"): ``--config``/``BUSBAR_CONFIG`` else
``/etc/busbar/config.yaml``; ``--providers``/``BUSBAR_PROVIDERS`` else
``/etc/busbar/providers.yaml`` when it exists, else the catalog shipped in the package.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml
from pydantic import ValidationError

from busbar.config.errors import ConfigError, faults_from_validation
from busbar.config.interpolate import InterpolationError, interpolate
from busbar.config.schema import CatalogProvider, DeploymentConfig

DEFAULT_CONFIG = Path("/etc/busbar/config.yaml")
DEFAULT_PROVIDERS = Path("/etc/busbar/providers.yaml")

# 1.x structural markers (seeds 001 "Migrating a 1.4.x config"; seed 002's 1.2-era keys).
_MIGRATE_HINT = "this looks like a Busbar 1.x config; run busbar --migrate-config"


@dataclass
class LoadedConfig:
    """The typed, validated config. ``catalog``: provider name -> CatalogProvider (merged source);
    ``warnings``: non-fatal findings to log at boot."""

    config: DeploymentConfig
    catalog: dict[str, CatalogProvider]
    config_path: Path
    providers_path: Path | None
    warnings: list[str] = field(default_factory=list)


def resolve_paths(config: str | None, providers: str | None,
                  env: Mapping[str, str] = os.environ) -> tuple[Path, Path | None]:
    """Apply flag > env > default for both files; ``None`` providers = the shipped catalog."""
    cfg = Path(config or env.get("BUSBAR_CONFIG") or DEFAULT_CONFIG)
    prov_s = providers or env.get("BUSBAR_PROVIDERS")
    if prov_s:
        return cfg, Path(prov_s)
    return cfg, (DEFAULT_PROVIDERS if DEFAULT_PROVIDERS.exists() else None)


def _read_yaml(path: Path | None, label: str, env: Mapping[str, str]) -> Any:
    if path is None:
        text = resources.files("busbar.catalog").joinpath("providers.yaml").read_text("utf-8")
    else:
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise ConfigError([f"{label}: file not found: {path}; pass --config/--providers or set "
                               f"BUSBAR_CONFIG/BUSBAR_PROVIDERS"]) from None
        except OSError as e:
            raise ConfigError([f"{label}: cannot read {path}: {e.strerror}"]) from None
    try:
        text = interpolate(text, env, source=label)
    except InterpolationError as e:
        raise ConfigError(e.faults) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError([f"{label}{where}: invalid YAML: {problem}"]) from None
    return data if data is not None else {}


def _legacy_markers(data: dict) -> list[str]:
    found = []
    if "governance" in data:
        found.append("governance")
    if "hooks" in data:
        found.append("hooks (top level)")
    for k in ("route", "policy"):
        if k in data:
            found.append(k)
    auth = data.get("auth")
    if isinstance(auth, dict):
        found += [f"auth.{k}" for k in ("group_map", "mode", "client_tokens") if k in auth]
    for name, p in (data.get("providers") or {}).items():
        if isinstance(p, dict) and "api_key_env" in p:
            found.append(f"providers.{name}.api_key_env")
    for name, pool in (data.get("pools") or {}).items():
        if not isinstance(pool, dict):
            continue
        for k in ("route", "policy"):
            if k in pool:
                found.append(f"pools.{name}.{k}")
        for i, m in enumerate(pool.get("members") or []):
            if isinstance(m, dict):
                found += [f"pools.{name}.members[{i}].{k}" for k in ("target", "cost_per_mtok") if k in m]
    return found


def load_config(config_path: Path, providers_path: Path | None = None,
                env: Mapping[str, str] = os.environ) -> LoadedConfig:
    """Run the whole boot pipeline on the two files; raise ``ConfigError`` with every fault."""
    cfg_label = config_path.name
    prov_label = providers_path.name if providers_path else "providers.yaml (shipped catalog)"
    raw_catalog = _read_yaml(providers_path, prov_label, env)
    raw_cfg = _read_yaml(config_path, cfg_label, env)
    faults: list[str] = []
    if not isinstance(raw_catalog, dict):
        faults.append(f"{prov_label}: must be a map of provider name -> definition")
        raw_catalog = {}
    if not isinstance(raw_cfg, dict):
        raise ConfigError(faults + [f"{cfg_label}: must be a map (providers:, models:, pools:, …)"])
    legacy = _legacy_markers(raw_cfg)
    if legacy:
        raise ConfigError([f"{cfg_label}: {m}: {_MIGRATE_HINT}" for m in legacy])

    catalog: dict[str, CatalogProvider] = {}
    for name, entry in raw_catalog.items():
        try:
            catalog[str(name)] = CatalogProvider.model_validate(entry)
        except ValidationError as e:
            faults += faults_from_validation(e, prov_label, prefix=str(name))
    try:
        config = DeploymentConfig.model_validate(raw_cfg)
    except ValidationError as e:
        raise ConfigError(faults + faults_from_validation(e, cfg_label)) from None
    if faults:
        raise ConfigError(faults)

    from busbar.config.validate import validate  # local import: validate imports this module's types

    loaded = LoadedConfig(config, catalog, config_path, providers_path)
    errors, warnings = validate(loaded, env)
    if errors:
        raise ConfigError(errors)
    loaded.warnings = warnings
    return loaded
