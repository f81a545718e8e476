"""Cross-reference and value checks over the typed config: every fault collected, none raised early.

``validate(loaded, env, *, read_file=None, plugins=None) -> (errors, warnings)``; each entry is one
line ``config.yaml: <key path>: <what is wrong>; <the fix>``. The rules live in one module per
section, each a ``check(ctx)`` over a shared :class:`Context`:

==========================  =====================================================================
module rows of docs/configuration.md#startup-checks
==========================  =====================================================================
``validate_providers``      reserved provider/model names, protocol/auth/error_map values, path,
                            base_url + token_url SSRF and plaintext, oauth fields, provider
                            reference, max_concurrent / max_requests / default_max_tokens /
                            attempt_timeout_ms / upstream_model, empty-credential warning
``validate_pools``          pool name reserved / collision, empty members, weight, member model,
                            failover timeout / exclusions, breaker ranges and cooldown ceiling,
                            affinity, fallback-pool unknown / self / cycle, heterogeneous warning
``validate_hooks``          one ordering strategy, bare name not a strategy, hook subsystem
                            disabled, unknown hook module (with a plugin catalog), prompt: rw on
                            a tap, settings per the manifest schema (egress URL SSRF), on_error
                            chains terminate
``validate_groups``         group tree (missing parent stub, cycle path, depth > 8), malformed
                            limits, pool scope / downgrade, rate_card incomplete (stub)
``validate_auth``           chain / admin_auth modules, role_bindings, blank admin token, exposed
                            admin without mTLS, listen addresses, tls files, signing key, store
                            plugin, secret-plugin refs, open-door / passthrough / memory warnings
``validate_ops``            limits ranges, otlp_url / request_log_webhook_url SSRF, metrics,
                            security lists, advanced, a plugins.min_versions key naming no plugin
                            in plugins.dir (warning, with a plugin catalog)
==========================  =====================================================================

Zero side effects: no socket, no write, no plugin imported; secret files are read through
``read_file``. Every configured egress URL (provider ``base_url`` / ``token_url``, a hook plugin's
``x-busbar-egress-url`` settings, ``observability.otlp_url`` / ``request_log_webhook_url``) is judged by
the one SSRF guard, ``busbar_sdk.ssrf.SsrfPolicy.check_url`` (:meth:`Context.url`). Rows that need the
plugin loader (artifact validity, name conflicts, "does this module resolve to a loadable kind: X
plugin") run only when a ``plugins`` catalog is passed; without one the checks stop at "is
plugins.enabled on".

Source: docs/configuration.md#startup-checks, every section it refers to; docs/hooks.md#fail-safety; C032 (one SSRF
guard for every egress URL).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from busbar.config.errors import Findings
from busbar.config.schema_base import EnvRef, FileRef
from busbar.config.secrets import FileReader, SecretError, read_text_file, resolve_secret

if TYPE_CHECKING:
    from busbar_sdk.ssrf import SsrfPolicy

    from busbar.config.load import LoadedConfig
    from busbar.config.schema import DeploymentConfig


class PluginCatalog(Protocol):
    """What validation asks of the plugin loader (manifest-only; nothing is imported).

    ``kind_of(name)``: the ``kind`` (hook, auth, store, secret) of the loadable plugin whose manifest
    name or alias is ``name``; None when no loadable plugin answers to it.

    Optional ``names_of(name) -> set[str]``: every name (manifest name and aliases) of the plugin that
    answers to ``name``; lets a role binding sit under a plugin's own name when the chain uses an alias.

    Optional ``settings_schema_of(name) -> str | None``: the plugin's manifest ``settings_schema``;
    lets validation judge an instance's ``settings:`` by the rules the schema declares (required keys,
    ``x-busbar-egress-url`` URLs through the SSRF guard; ``busbar_sdk.settings_schema``).

    Optional ``installed() -> dict[str, str]``: every plugin in plugins.dir whose manifest parsed
    (loadable or not), manifest name -> alias; lets validation warn about a ``plugins.min_versions``
    key that names none of them.

    Optional ``why_not(name) -> str | None``: for a plugin in plugins.dir that answers to ``name`` but
    will not load (untrusted, below its floor), the file and the reason.
    """

    def kind_of(self, name: str) -> str | None: ...


def _merged_provider_fields(loaded: Any, name: str) -> dict[str, Any]:
    """Catalog entry overlaid with the deployment overrides (error_map merged per code).

    Returns the catalog fields (``protocol``, ``base_url``, ``error_map``, ``path``, ``path_base``,
    ``auth``, ``token_url``, ``scope``, ``subject``, ``health``) as a dict; a provider absent from the
    catalog starts from ``protocol: anthropic`` and no base_url. Used by the gateway at build time.
    """
    dep = loaded.config.providers[name]
    cat = loaded.catalog.get(name)
    out = cat.model_dump() if cat else {"protocol": "anthropic", "base_url": None, "error_map": {}}
    for k, v in dep.model_dump(exclude={"api_key", "error_map", "allow_metadata_hosts"}).items():
        if v is not None:
            out[k] = v
    out["error_map"] = {**(out.get("error_map") or {}), **dep.error_map}
    return out


@dataclass
class Context:
    """Shared state of one validation run; section modules read ``cfg`` and write through it."""

    loaded: LoadedConfig
    env: Mapping[str, str]
    read_file: FileReader
    plugins: PluginCatalog | None
    out: Findings = field(default_factory=Findings)
    _policy: Any = None

    @property
    def cfg(self) -> DeploymentConfig:
        return self.loaded.config

    @property
    def src(self) -> str:
        """Label of config.yaml in fault lines (its file name)."""
        return self.loaded.config_path.name

    @property
    def cat_src(self) -> str:
        """Label of providers.yaml in fault lines."""
        p = self.loaded.providers_path
        return p.name if p is not None else "providers.yaml"

    def err(self, path: str, text: str) -> None:
        self.out.error(self.src, path, text)

    def warn(self, path: str, text: str) -> None:
        self.out.warn(self.src, path, text)

    def merged(self, provider: str) -> dict[str, Any]:
        return _merged_provider_fields(self.loaded, provider)

    def protocol_of_model(self, model: str) -> str | None:
        m = self.cfg.models.get(model)
        if m is None or m.provider not in self.cfg.providers:
            return None
        return self.merged(m.provider).get("protocol")

    # --- secrets ------------------------------------------------------------------------------

    def secret(self, ref: Any, path: str) -> str | None:
        """Resolve an env/file reference for a check; None for a module ref (needs the loader) or an
        unreadable file (reported here as an error, as the boot would fail on it)."""
        if not isinstance(ref, (EnvRef, FileRef)):
            module = getattr(ref, "module", "")
            self.plugin_ref(module, path, kind="secret")
            self.plugin_settings(module, getattr(ref, "settings", {}), path, kind="secret")
            return None
        try:
            return resolve_secret(ref, self.env, where=path, read_file=self.read_file)
        except SecretError as e:
            self.out.errors.append(f"{self.src}: {e}")
            return None

    # --- plugins ------------------------------------------------------------------------------

    def plugin_ref(self, module: str, path: str, *, kind: str) -> None:
        """A config names a plugin ``module`` of ``kind``: it needs plugins.enabled, and (with a
        catalog) a loadable plugin of that kind."""
        if not self.cfg.plugins.enabled:
            self.err(path, f"'{module}' is a kind: {kind} plugin but plugins.enabled is false; set "
                           f"plugins.enabled: true and install its tarball in plugins.dir")
            return
        if self.plugins is None:
            return
        found = self.plugins.kind_of(module)
        why_not = getattr(self.plugins, "why_not", None)
        refused = why_not(module) if found is None and why_not is not None else None
        if refused is not None:
            self.err(path, f"'{module}' will not load: {refused}")
        elif found is None:
            self.err(path, f"'{module}' does not resolve to a loadable plugin in plugins.dir "
                           f"({self.cfg.plugins.dir}); install its signed tarball or fix the name "
                           f"(busbar --list-plugins shows what loads)")
        elif found != kind:
            self.err(path, f"'{module}' is a kind: {found} plugin, not a kind: {kind} plugin; name a "
                           f"kind: {kind} plugin")

    def plugin_settings(self, module: str, settings: Any, path: str, *, kind: str) -> None:
        """A ``kind`` plugin instance's ``settings`` (the instance at ``path``; faults at
        ``<path>.settings.<key>``) against its manifest ``settings_schema``, with a catalog that
        serves it and names ``module`` a loadable plugin of that kind: the schema itself
        (busbar.config.plugin_settings), then its ``x-busbar-egress-url`` settings through the SSRF
        guard with the instance's ``x-busbar-egress-allow`` list (busbar.security.egress, as for a
        hook; a hook's settings go through busbar.hooks.check). One fault per key path."""
        catalog = self.plugins
        schema_of = getattr(catalog, "settings_schema_of", None)
        if catalog is None or schema_of is None or not self.cfg.plugins.enabled or catalog.kind_of(module) != kind:
            return
        from dataclasses import replace

        from busbar_sdk.settings_schema import settings_rules

        from busbar.config.plugin_settings import with_schema_faults
        from busbar.security.egress import settings_faults as egress_faults

        schema = schema_of(module)
        first: list[tuple[str, str]] = []
        if isinstance(schema, (str, dict)) and isinstance(settings, dict):
            try:
                rules = settings_rules(schema)
            except ValueError:            # a misused keyword: the manifest check reports it
                rules = None
            if rules is not None and rules.egress_urls:
                # required keys: the schema's own "<key>: required" line
                first = egress_faults(replace(rules, required=()), settings, module=module, path=path,
                                      policy=self.policy)
        for where, text in with_schema_faults(first, schema, settings, module, prefix=f"{path}.settings",
                                              root_required=True):
            self.err(where, text)

    # --- SSRF ---------------------------------------------------------------------------------

    @property
    def policy(self) -> SsrfPolicy:
        """The SSRF policy of the ``security:`` block (built once; a bad entry is reported once)."""
        if self._policy is None:
            from busbar_sdk.ssrf import SsrfPolicy  # the pure verdicts; not the transport

            from busbar.security.ssrf import policy_of

            sec = self.cfg.security
            try:
                self._policy = policy_of(sec)
            except ValueError as e:
                self.err("security", f"{e}; use host names, IP literals or CIDRs")
                self._policy = SsrfPolicy()
        return self._policy

    def url(self, url: str, path: str, *, allow_private: bool, provider_allow: Sequence[str] = (),
            require_https: bool = False, note: str = "") -> bool:
        """Run the one SSRF guard on a configured egress URL; a refusal becomes a fault at ``path``.

        The guard's reason starts with the purpose (we pass the key path) and is stripped of it, so
        the line reads ``providers.x.base_url: 169.254.169.254 is a cloud-metadata endpoint; ...``.
        Returns True when the URL passed.
        """
        from busbar_sdk.ssrf import SsrfBlocked

        try:
            self.policy.check_url(url, purpose=path, provider_allow=tuple(provider_allow),
                                  allow_private=allow_private, require_https=require_https)
        except SsrfBlocked as e:
            reason = e.reason
            if reason.startswith(path + ": "):
                reason = reason[len(path) + 2:]
            elif reason.startswith(path + " "):
                reason = reason[len(path) + 1:]
            self.err(path, reason + note)
            return False
        return True


Check = Callable[[Context], None]


def _checks() -> list[Check]:
    from busbar.config import (
        validate_auth,
        validate_groups,
        validate_hooks,
        validate_ops,
        validate_pools,
        validate_providers,
    )

    return [validate_auth.check_listeners, validate_auth.check_auth, validate_groups.check,
            validate_auth.check_store, validate_providers.check, validate_pools.check,
            validate_hooks.check, validate_ops.check]


def _key_path(line: str, src: str) -> str:
    return line[len(src) + 2:].split(": ", 1)[0] if line.startswith(src + ": ") else ""


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith((r + ".", r + "[")) for r in roots)


def validate(loaded: LoadedConfig, env: Mapping[str, str], *, read_file: FileReader | None = None,
             plugins: PluginCatalog | None = None, check_support: bool = False) -> tuple[list[str], list[str]]:
    """Return ``(errors, warnings)`` for the merged config; see the module docstring.

    Args:
        loaded: the typed config and catalog (``LoadedConfig``).
        env: the environment secret ``{ env: VAR }`` references resolve against.
        read_file: reader for ``{ file: PATH }`` references (default: the real file system).
        plugins: the loader's manifest-only catalog; None = checks needing it are skipped.
        check_support: also refuse the keys this build cannot honour when they are set
            (``busbar.config.support``; docs/unsupported-keys.md), as the gateway boot and
            ``--validate`` do; off, the 1.5 format alone is checked (``busbar store``, which works on
            the store config the gateway cannot serve with yet). An unsupported key's line replaces
            every other fault under its path.
    """
    ctx = Context(loaded, env, read_file or read_text_file, plugins)
    for check in _checks():
        check(ctx)
    errors, warnings = ctx.out.errors, ctx.out.warnings
    if check_support:
        from busbar.config.support import unsupported_faults
        refused = unsupported_faults(ctx.cfg, ctx.src)
        if refused:
            roots = [path for path, _ in refused]
            errors = [line for _, line in refused] + [e for e in errors
                                                      if not _under(_key_path(e, ctx.src), roots)]
            warnings = [w for w in warnings if not _under(_key_path(w, ctx.src), roots)]
    return errors, warnings
