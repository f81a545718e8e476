"""Boot steps between a validated config and a serving gateway: plugins, then the gateway.

``boot(loaded, env) -> (Gateway, PluginReloader | None)`` loads the plugin set (when
``plugins.enabled``), resolves secrets (``{ module: <secret-plugin> }`` through it) and builds the
gateway with its hook chains (``busbar.hooks``: an unloaded hook module, a non-terminating
``on_error`` chain, an SSRF-blocked sidecar URL are boot faults; a plugin reload rebuilds them).
Raises ``BootError`` with one line per fault (the CLI prints them and exits 2).
``check_plugins(loaded, env) -> list[str]``: the same plugin pipeline with nothing imported, for
``--validate``: the tarballs' structure and trust, then every config reference to a plugin checked
against the manifests (:func:`plugin_refs`). The boot runs that very check before it imports any
plugin code, so ``--validate`` and the boot print the same lines for every fault the manifests show
(docs/plugins.md#what-aborts-the-boot).

Source: docs/plugins.md (fail-closed guarantees), docs/config-at-a-glance.md#providers (secret references).
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from busbar.config.load import LoadedConfig
    from busbar.loader import PluginReloader, PluginSet
    from busbar.loader.catalog import ManifestCatalog
    from busbar.loader.pipeline import Admit
    from busbar.loader.secrets import SecretModuleResolver
    from busbar.proxy.gateway import Gateway

from busbar.faults import FaultList


class BootError(FaultList):
    """The gateway cannot start; ``faults``: one line each. ``checked``: every fault was found before
    any plugin code ran (``--validate`` reports the same lines)."""

    def __init__(self, faults: list[str], *, checked: bool = False):
        super().__init__(faults)
        self.checked = checked


def plugin_refs(loaded: LoadedConfig, env: Mapping[str, str]) -> Admit:
    """The ``admit`` check of :func:`busbar.loader.load_plugins` for this config: the validation rows
    that need the manifest catalog (hook ``module:``, ``auth.chain``, ``store.module``, secret
    modules) as fault lines; ``admit(catalog) -> list[str]``. The warnings only the catalog shows (a
    ``plugins.min_versions`` key naming no plugin in plugins.dir) are appended to ``loaded.warnings``,
    once each, so ``--validate``, the boot and a config apply report them alike."""
    from busbar.config.validate import validate

    def admit(catalog: ManifestCatalog) -> list[str]:
        errors, warnings = validate(loaded, env, plugins=catalog, check_support=True)
        loaded.warnings.extend(w for w in dict.fromkeys(warnings) if w not in loaded.warnings)
        return errors
    return admit


def check_plugins(loaded: LoadedConfig, env: Mapping[str, str]) -> list[str]:
    """Plugin faults of ``loaded`` without importing anything (``--validate``)."""
    cfg = loaded.config.plugins
    if not cfg.enabled:
        return []
    from busbar.loader import PluginBootError, load_plugins
    from busbar.loader.highwater import allowed_downgrades

    try:
        load_plugins(cfg, base_dir=Path.cwd(), import_code=False, admit=plugin_refs(loaded, env),
                     allow_downgrade=allowed_downgrades(env))
    except PluginBootError as e:
        return list(e.faults)
    return []


def boot(loaded: LoadedConfig, env: Mapping[str, str]) -> tuple[Gateway, PluginReloader | None]:
    """Load plugins and build the gateway; raises ``BootError``."""
    from busbar.config.secrets import SecretError
    from busbar.loader import SecretResolutionError
    from busbar.proxy.gateway import Gateway

    reloader: PluginReloader | None = None
    resolver: SecretModuleResolver | None = None
    if loaded.config.plugins.enabled:
        from busbar.loader import PluginBootError, PluginReloader
        from busbar.loader.highwater import allowed_downgrades
        from busbar.loader.secrets import SecretModuleResolver

        reloader = PluginReloader(loaded.config.plugins, base_dir=Path.cwd())
        logged = len(loaded.warnings)             # the CLI logged these before the boot
        try:
            plugin_set = reloader.start(admit=plugin_refs(loaded, env),
                                        allow_downgrade=allowed_downgrades(env))
        except PluginBootError as e:
            raise BootError(list(e.faults), checked=not e.imported) from None
        for w in loaded.warnings[logged:]:        # those only the manifests show (as --validate prints them)
            logging.getLogger("busbar.config").warning("%s", w)
        resolver = SecretModuleResolver(plugin_set)
    from busbar.hooks import HookBootError, reattach
    from busbar.store import StoreBootError

    try:
        gateway = Gateway.build(loaded, env, module_resolver=resolver,
                                plugins=reloader.current if reloader is not None else None)
    except (SecretError, SecretResolutionError) as e:
        raise BootError([str(e)]) from None
    except (HookBootError, StoreBootError) as e:
        if reloader is not None:
            reloader.close()
        raise BootError(list(e.faults)) from None
    gateway.plugins = reloader
    if reloader is not None and gateway.hooks is not None:
        def follow(old: PluginSet, new: PluginSet) -> None:          # SIGHUP: hooks follow the new set
            reattach(gateway, new)

        reloader.on_swap = follow
    return gateway, reloader
