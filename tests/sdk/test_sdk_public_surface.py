"""The sdk's public surface, pinned: its public modules and what each exports; and the kernel and the
first-party plugins import the sdk through that surface only (never a ``busbar_sdk._private`` module).
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import busbar_sdk
import pytest

REPO = Path(__file__).resolve().parents[2]

PUBLIC_MODULES = ["artifact", "hookspec", "models", "rules", "settings_schema", "shared_state", "sidecar", "ssrf",
                  "store", "testing", "versions", "wire"]

PINNED = {
    "wire": ["ACALL_CAPABILITY", "ARM_ABSTAIN", "ARM_ORDER", "ARM_REJECT", "ARM_RESTRICT", "ARM_REWRITE",
             "CANDIDATE_FIELDS", "CAPABILITY_NAMES", "DEFAULT_REJECT_MESSAGE", "DEFAULT_REJECT_STATUS",
             "INLINE_CAPABILITY", "MANAGEMENT_KEYS", "MAX_REJECT_MESSAGE_CHARS", "MAX_RESTRICT_TAGS", "MODEL_TAG_PREFIX",
             "OP_DECIDE",
             "OP_NOTIFY", "OP_TRANSFORM", "PER_REQUEST_OPS", "REDACTED_REASONING", "REJECT_FIELDS",
             "REJECT_STATUS_MAX", "REJECT_STATUS_MIN", "REQUEST_FIELDS", "RESTRICT_FIELDS", "RESTRICT_TAGS",
             "REWRITE_FIELDS", "STAGE_FIELDS", "UNBOUNDED_PERMITS", "UNSAFE_TEXT", "is_reject", "reject_message",
             "reject_status"],
    "ssrf": ["ADDRESS_CLASSES", "BUILTIN_METADATA_HOSTS", "CanonicalHost", "HostGuard", "IPAddress", "Network",
             "SsrfBlocked", "SsrfPolicy", "SyncResolver", "address_class", "canonical_host", "deployment_policy",
             "embedded_ipv4", "set_deployment_policy",
             "host_addresses", "is_localhost_name", "parse_host_or_network", "redact_url", "system_resolver",
             "unique_addresses"],
    "settings_schema": ["CEL_KEYWORD", "CREDENTIAL_HEADERS", "EGRESS_ALLOW_KEYWORD", "EGRESS_URL_KEYWORD", "GATEWAY_MODEL_KEYWORD",
                        "GATEWAY_POOL_KEYWORD", "GatewayRefs", "HEADERS_KEYWORD", "NO_RULES", "POOL_MEMBER_KEYWORD",
                        "STATUS_METRICS_KEYWORD", "SettingsRules", "WITHIN_TIMEOUT_KEYWORD", "cel_faults", "cel_texts",
                        "deadline_settings",
                        "exports_status_metrics", "gateway_refs", "header_faults", "header_names",
                        "is_credential_header", "member_names", "settings_rules"],
    "rules": ["COMBINE_MAX", "MATCH_MODES", "REQ_FIELDS", "fields_of", "Outcome", "Rule", "RuleSet", "RulesError",
              "activation", "check_headers", "compile_expr", "header_fault", "header_refs", "holds",
              "names_of", "reply_for",
              "req_object"],
    "versions": ["AUTH_ABI_VERSION", "ENTRY_POINT_GROUP", "HOOK_ABI_VERSION", "KINDS", "NAME_PATTERN",
                 "PROJECT_NAME", "RESERVED_PUBLISHER", "SECRET_ABI_VERSION", "STORE_ABI_VERSION",
                 "SUPPORTED_ABI_VERSIONS", "TRANSPORT_VERSION", "Kind", "SemVer", "is_valid_name", "parse_semver"],
    "shared_state": ["DEFAULT_TIMEOUT_S", "MAX_KEY_CHARS", "MAX_TIMEOUT_S", "MAX_TTL_S", "MAX_VALUE_BYTES",
                     "SHARED_STATE_VERSION", "WINDOWS_S", "SharedState", "SharedStateError", "SharedStateInvalid",
                     "check_counter", "check_key", "check_put"],
    "hookspec": ["CAPABILITY_NAMES", "HOOK_NAMES", "REQUIRED_HOOKS", "busbar_abi", "busbar_acall", "busbar_bind_state",
                 "busbar_call",
                 "busbar_close", "busbar_free", "busbar_inline", "busbar_open", "busbar_plugin_kind", "hookimpl",
                 "hookspec"],
}


def test_the_public_modules_are_exactly_these() -> None:
    found = sorted(m.name for m in pkgutil.iter_modules(busbar_sdk.__path__) if not m.name.startswith("_"))
    assert found == PUBLIC_MODULES


@pytest.mark.parametrize("module", sorted(PINNED))
def test_each_public_module_exports_exactly_its_pinned_names(module: str) -> None:
    mod = importlib.import_module(f"busbar_sdk.{module}")
    assert sorted(mod.__all__) == sorted(PINNED[module])
    for name in mod.__all__:
        assert hasattr(mod, name), f"busbar_sdk.{module}.{name}"


def _sdk_imports(root: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for n in names:
                if n.split(".")[0] == "busbar_sdk":
                    out.append((str(path.relative_to(REPO)), n))
    return out


@pytest.mark.parametrize("root", ["kernel/src/busbar", "plugins/busbar-webrequest-hook/src",
                                  "plugins/busbar-headroom-hook/src"])
def test_the_kernel_and_first_party_plugins_use_the_public_surface_only(root: str) -> None:
    imports = _sdk_imports(REPO / root)
    assert imports, f"{root} imports nothing from the sdk"
    private = [(f, n) for f, n in imports if any(part.startswith("_") for part in n.split(".")[1:])]
    assert private == []
