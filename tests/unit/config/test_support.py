"""Issue 11 item 17: every config key is either read at run time or refused at boot when set.

The schema is walked field by field; each leaf must be listed exactly once in
``busbar.config.support`` (READERS, UNSUPPORTED or NO_EFFECT), a reader must name the field in its
module, and docs/unsupported-keys.md must be the registry's rendering. Then each unsupported key
set to a non-default value is refused with its exact line, and the shipped configs still load.
"""
from __future__ import annotations

import re
import types
import typing
from pathlib import Path

import pytest
from busbar.config import support
from busbar.config.errors import ConfigError
from busbar.config.load import load_config, load_config_text
from busbar.config.schema import DeploymentConfig, EnvRef, FileRef, ModuleRef
from pydantic import BaseModel

from tests.support.certs import pem_bundle

ROOT = Path(__file__).resolve().parents[3]
KERNEL = ROOT / "kernel" / "src" / "busbar"
_SECRET = {EnvRef, FileRef, ModuleRef}


def _members(tp: typing.Any) -> list[typing.Any]:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(tp) for m in _members(a)]
    return [tp]


def _is_model(tp: typing.Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def leaves(tp: typing.Any, path: str) -> set[str]:
    """Every leaf key path under ``tp`` (``*`` = a map key, ``[]`` = a list item)."""
    members = [m for m in _members(tp) if m is not type(None)]
    if set(members) == _SECRET:
        return {path}                      # a secret reference is one value
    out: set[str] = set()
    for m in members:
        origin, args = typing.get_origin(m), typing.get_args(m)
        if _is_model(m):
            for name, f in m.model_fields.items():
                out |= leaves(f.annotation, f"{path}.{name}" if path else name)
        elif origin in (list, tuple) and args and any(_is_model(a) for a in _members(args[0])):
            out |= leaves(args[0], f"{path}[]")
        elif origin is dict and len(args) == 2 and (any(_is_model(a) for a in _members(args[1]))
                                                     or typing.get_origin(args[1]) is dict):
            out |= leaves(args[1], f"{path}.*")
        else:
            out.add(path)
    return out


SCHEMA = sorted(leaves(DeploymentConfig, ""))
PATTERNS = {**{p: "reader" for p in support.READERS}, **{u.path: "unsupported" for u in support.UNSUPPORTED},
            **{p: "no effect" for p in support.NO_EFFECT}}


def covering(leaf: str) -> list[str]:
    return [p for p in PATTERNS if leaf == p or leaf.startswith((p + ".", p + "["))]


def test_the_walk_sees_the_whole_schema() -> None:
    assert len(SCHEMA) > 120
    assert {"listen", "store.module", "pools.*.members[].weight", "providers.*.api_key",
            "pools.*.hooks[].module", "groups.*.limits[].budget"} <= set(SCHEMA)


@pytest.mark.parametrize("leaf", SCHEMA)
def test_every_schema_field_has_a_reader_or_is_listed_unsupported(leaf: str) -> None:
    found = covering(leaf)
    assert found, (f"config key {leaf} has no runtime reader and is not in the unsupported list: add it to "
                   f"busbar.config.support.READERS (the module that reads it) or UNSUPPORTED (refused at boot "
                   f"when set), then run python -m busbar.config.support --write")
    assert len(found) == 1, f"{leaf} is listed more than once: {found}"


def test_no_registry_entry_is_stale() -> None:
    for pattern in PATTERNS:
        assert any(leaf == pattern or leaf.startswith((pattern + ".", pattern + "[")) for leaf in SCHEMA), pattern


@pytest.mark.parametrize(("pattern", "module"), sorted(support.READERS.items()))
def test_each_reader_module_names_its_field(pattern: str, module: str) -> None:
    field = [p for p in re.split(r"[.\[\]*]+", pattern) if p][-1]
    source = (KERNEL / module).read_text("utf-8")
    assert re.search(rf"\b{field}\b", source), f"{module} does not mention {field} ({pattern})"


def test_the_doc_is_the_registry() -> None:
    doc = ROOT / support.DOC_PATH
    assert doc.read_text("utf-8") == support.render_doc(), (
        f"{support.DOC_PATH} is stale; run: .venv/bin/python -m busbar.config.support --write")


# ------------------------------------------------------------------------------------- refusals

ENV = {"K": "sk-test", "SIGN": "x"}
BASE = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  claude: { provider: anthropic }\n"
TAIL = "is not supported in this build; see docs/unsupported-keys.md"


def faults(extra: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load_config_text(BASE + extra, ENV, check_support=True,
                         read_file=lambda p: pem_bundle())
    return exc.value.faults


@pytest.mark.parametrize(("extra", "line"), [
    ("advanced: { worker_threads: 4 }\n", f"advanced.worker_threads: 4: a worker thread count (run `busbar --workers N` for more "
                                           f"cores) {TAIL}"),
    ("advanced: { upstream_h2_prior_knowledge: true }\n",
     f"advanced.upstream_h2_prior_knowledge: True: HTTP/2 to upstreams (the upstream client is HTTP/1.1 only) "
     f"{TAIL}"),
], ids=lambda v: v.split(":")[0] if isinstance(v, str) and v.endswith("\n") else None)
def test_a_set_unsupported_key_is_refused_with_one_line(extra: str, line: str) -> None:
    assert faults(extra) == [f"config.yaml: {line}"]


def test_defaults_written_out_are_not_refused() -> None:
    loaded = load_config_text(BASE + "store: { module: memory }\nauth: { chain: [], upstream_credentials: own, "
                              "admin_auth: [admin-tokens] }\nper_request_fee: 0\ngroups: {}\n"
                              "advanced: { upstream_http1_only: true, rate_sweep_interval: 256 }\n"
                              "metrics: { buffer_seconds: 30 }\nadmin_listen: 127.0.0.1:8081\n"
                              "rate_card: { claude: { input_utok: 1, output_utok: 2 } }\n", ENV, check_support=True)
    assert loaded.config.store.module == "memory"


def test_a_store_plugin_and_the_flush_interval_pass_the_support_check() -> None:
    loaded = load_config_text(BASE + "plugins: { enabled: true }\nstore: { module: sqlite, settings: { db_path: /x } }\n"
                              "advanced: { usage_flush_interval_ms: 250 }\n", ENV, check_support=True)
    assert (loaded.config.store.module, loaded.config.advanced.usage_flush_interval_ms) == ("sqlite", 250)


@pytest.mark.parametrize("path", ["examples/quickstart/config.yaml", "bench/gwbench-config.yaml"])
def test_the_shipped_configs_load_with_the_support_check(path: str) -> None:
    env = {"MOCK_OPENAI_KEY": "k", "MOCK_ANTHROPIC_KEY": "k", "MOCK_UPSTREAM_KEY": "k", "MOCK_BASE": "http://127.0.0.1:9",
           "GW_PORT": "8080"}
    load_config(ROOT / path, None, env, check_support=True)
