"""Load providers.yaml + config.yaml: interpolate, parse, type, validate, merge — or fail with every fault.

``load_config(config_path, providers_path=None, env=os.environ, *, read_file=None, plugins=None)
-> LoadedConfig`` (and :func:`load_config_text` over in-memory texts) is the exact pipeline of a boot
and of ``busbar --validate`` (zero side effects: no socket, no file written, no plugin imported).
Raises ``ConfigError`` carrying one line per fault.

Stages, each reporting all of its faults before the pipeline stops:

1. read both files (a missing file names the flag / env var that points at it);
2. ``${VAR}`` interpolation with the structural check (``busbar.config.interpolate``);
3. YAML parse; a duplicate mapping key is a fault (the later key would silently win);
4. 1.x markers (``busbar.config.legacy``): refuse with a pointer to ``busbar --migrate-config``;
5. shapes: every catalog entry and config.yaml against the typed models (unknown keys, types);
6. values and cross-references: ``busbar.config.validate`` (errors and warnings), and the keys this
   build cannot honour refused when set (``busbar.config.support``, docs/unsupported-keys.md).

Path resolution (docs/configuration.md): ``--config``/``BUSBAR_CONFIG`` else
``/etc/busbar/config.yaml``; ``--providers``/``BUSBAR_PROVIDERS`` else
``/etc/busbar/providers.yaml`` when it exists, else the catalog shipped in the package.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from busbar.config.errors import ConfigError, faults_from_validation
from busbar.config.interpolate import InterpolationError, interpolate
from busbar.config.legacy import MIGRATE_HINT, legacy_markers, raw_legacy_markers
from busbar.config.schema import CatalogProvider, DeploymentConfig
from busbar.config.secrets import FileReader

DEFAULT_CONFIG = Path("/etc/busbar/config.yaml")
DEFAULT_PROVIDERS = Path("/etc/busbar/providers.yaml")

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader that records duplicate mapping keys instead of letting the later one win."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.duplicates: list[tuple[int, str, int]] = []  # (line, key, first line)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                self.duplicates.append((line, str(key), seen[key]))
            else:
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


@dataclass
class LoadedConfig:
    """The typed, validated config.

    Attributes:
        config: config.yaml as :class:`DeploymentConfig`.
        catalog: provider name -> :class:`CatalogProvider` (providers.yaml, the merge source).
        config_path, providers_path: where they came from (``None`` = the shipped catalog).
        warnings: non-fatal findings, one line each, to log at boot.
    """

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


def read_source(path: Path | None, label: str) -> str:
    """The raw text of a config file (``None`` = the shipped catalog); ``ConfigError`` if unreadable."""
    if path is None:
        return resources.files("busbar.catalog").joinpath("providers.yaml").read_text("utf-8")
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{label}: file not found: {path}; pass --config/--providers or set "
                           f"BUSBAR_CONFIG/BUSBAR_PROVIDERS"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{label}: {path} is a directory; point at the YAML file"]) from None
    except OSError as e:
        raise ConfigError([f"{label}: cannot read {path}: {e.strerror}"]) from None
    except UnicodeDecodeError:
        raise ConfigError([f"{label}: {path} is not UTF-8 text"]) from None


def _yaml_fault(e: yaml.YAMLError, label: str) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f":{mark.line + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"{label}{where}: invalid YAML: {problem}"


def parse_yaml(text: str, label: str) -> Any:
    """Parse one document; ``ConfigError`` for invalid YAML or duplicate keys (every one of them).

    The C parser reads a valid file; an invalid one is re-read by the pure-Python parser, whose messages
    say more (``expected ',' or ']', but got '<stream end>'``).
    """
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as e:
        fault = _yaml_fault(e, label)
        if _BaseLoader is not yaml.SafeLoader:
            try:
                yaml.load(text, Loader=yaml.SafeLoader)
            except yaml.YAMLError as e2:
                fault = _yaml_fault(e2, label)
        raise ConfigError([fault]) from None
    finally:
        loader.dispose()
    if loader.duplicates:
        raise ConfigError([f"{label}:{line}: duplicate key '{key}' (first at line {first}; the later one "
                           f"would silently replace it); remove or rename one"
                           for line, key, first in loader.duplicates])
    return data if data is not None else {}


def _interpolated_yaml(text: str, label: str, env: Mapping[str, str]) -> Any:
    try:
        text = interpolate(text, env, source=label)
    except InterpolationError as e:
        raise ConfigError(e.faults) from None
    return parse_yaml(text, label)


def load_config(config_path: Path, providers_path: Path | None = None,
                env: Mapping[str, str] = os.environ, *, read_file: FileReader | None = None,
                plugins: Any = None, check_support: bool = False) -> LoadedConfig:
    """Run the whole boot pipeline on the two files; raise ``ConfigError`` with every fault.

    Args:
        config_path: config.yaml.
        providers_path: providers.yaml; None = the catalog shipped in the package.
        env: environment for ``${VAR}`` interpolation and ``{ env: VAR }`` secret references.
        read_file: reader for ``{ file: PATH }`` secret references (default: the file system).
        plugins: the plugin loader's manifest-only catalog (``validate.PluginCatalog``); None skips the
            rows that need it.
        check_support: also refuse the keys this build cannot honour when they are set
            (docs/unsupported-keys.md): what ``busbar`` does before it serves and ``busbar --validate``
            does; ``busbar store`` and the tests of the format's own rules leave it off. See
            :func:`busbar.config.validate.validate`.

    Returns:
        the :class:`LoadedConfig`, with ``warnings`` filled in.

    Raises:
        ConfigError: one line per fault (see the module docstring for the stages).
    """
    prov_label = providers_path.name if providers_path else "providers.yaml"
    faults: list[str] = []
    providers_text = ""
    try:
        providers_text = read_source(providers_path, prov_label)
    except ConfigError as e:
        faults = e.faults
    try:
        config_text = read_source(config_path, config_path.name)
    except ConfigError as e:
        raise ConfigError(faults + e.faults) from None
    if faults:
        raise ConfigError(faults)
    return load_config_text(config_text, env, providers_text=providers_text, config_path=config_path,
                            providers_path=providers_path, read_file=read_file, plugins=plugins,
                            check_support=check_support)


def load_config_text(config_text: str, env: Mapping[str, str] = os.environ, *,
                     providers_text: str | None = None, config_path: Path = Path("config.yaml"),
                     providers_path: Path | None = None, read_file: FileReader | None = None,
                     plugins: Any = None, check_support: bool = False) -> LoadedConfig:
    """:func:`load_config` over texts already in memory (stages 2-6).

    ``providers_text`` None = the shipped catalog. ``config_path`` / ``providers_path`` only label the
    faults (their file names) and fill :class:`LoadedConfig`; nothing is read from them.
    """
    cfg_label = config_path.name
    prov_label = providers_path.name if providers_path else "providers.yaml"
    if providers_text is None:
        providers_text = read_source(None, prov_label)
    faults: list[str] = []
    raw_catalog: Any = {}
    try:
        raw_catalog = _interpolated_yaml(providers_text, prov_label, env)
    except ConfigError as e:
        faults += e.faults
    try:
        raw_cfg = _interpolated_yaml(config_text, cfg_label, env)
    except ConfigError as e:
        legacy = raw_legacy_markers(config_text)
        if legacy:  # a 1.x config names variables 1.5.0 no longer needs: point at the migrator first
            raise ConfigError(faults + [f"{cfg_label}: {path}: {MIGRATE_HINT}" for path, _ in legacy]) from None
        raise ConfigError(faults + e.faults) from None
    if not isinstance(raw_catalog, dict):
        faults.append(f"{prov_label}: must be a map of provider name -> definition")
        raw_catalog = {}
    if not isinstance(raw_cfg, dict):
        raise ConfigError(faults + [f"{cfg_label}: must be a map (providers:, models:, pools:, …)"])
    legacy = legacy_markers(raw_cfg)
    if legacy:
        raise ConfigError(faults + [f"{cfg_label}: {path}: {MIGRATE_HINT}" for path, _ in legacy])

    catalog: dict[str, CatalogProvider] = {}
    for name, entry in raw_catalog.items():
        try:
            catalog[str(name)] = CatalogProvider.model_validate(entry)
        except ValidationError as e:
            faults += faults_from_validation(e, prov_label, prefix=str(name), model=CatalogProvider)
    try:
        config = DeploymentConfig.model_validate(raw_cfg)
    except ValidationError as e:
        raise ConfigError(faults + faults_from_validation(e, cfg_label, model=DeploymentConfig)) from None
    if faults:
        raise ConfigError(faults)

    from busbar.config.validate import validate  # local import: validate imports this module's types

    loaded = LoadedConfig(config, catalog, config_path, providers_path)
    errors, warnings = validate(loaded, env, read_file=read_file, plugins=plugins,
                                check_support=check_support)
    if errors:
        raise ConfigError(errors)
    loaded.warnings = warnings
    return loaded
