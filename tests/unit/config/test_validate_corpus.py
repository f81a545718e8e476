"""Every YAML example the docs present as valid validates (docs/configuration.md#sections,
docs/hooks.md#configuring, docs/routing.md).

Corpus: ``tests/data/config_corpus/valid/<seed>-<section>.yaml``. Each file is the seed's example copied
verbatim (first YAML document; its ``#|`` header names the seed lines, the env vars it needs and any
placeholder substitution), then optionally ``---`` and a context document with what the fragment refers
to (providers, models, pools it names). The context is deep-merged under the fragment (the fragment
wins); a ``kind: providers`` fragment is a providers.yaml and its context is the config.yaml. Secret
files the examples name (TLS PEMs, key files) are served by a fake reader.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from busbar.auth.signing import generate_text
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

from tests.support.certs import pem_bundle

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "data" / "config_corpus" / "valid"
FILES = sorted(CORPUS.glob("*.yaml"))
SIGNING_PEM = generate_text()


def fake_read_file(path: str) -> str:
    if "signing" in path:    # auth.signing_key files are parsed as ed25519 keys
        return SIGNING_PEM
    return pem_bundle()      # a real certificate and its key: tls files are parsed


def parse_corpus(path: Path) -> dict[str, Any]:
    text = path.read_text("utf-8")
    header = dict(re.findall(r"^#\| (\w+): (.*)$", text, re.MULTILINE))
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#| "))
    fragment, _, context = body.partition("\n---\n")
    sub = header.get("substitute")
    validated = fragment
    if sub:
        old, new = (s.strip() for s in sub.split("=>"))
        validated = fragment.replace(old, new)
    return {"header": header, "fragment": fragment, "validated": validated, "context": context,
            "kind": header["kind"].split()[0], "env": {v: f"value-of-{v.lower()}" for v in header["env"].split()}}


def merge(base: Any, extra: Any) -> Any:
    """``base`` with ``extra``'s missing keys filled in, recursively (``base`` wins)."""
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for k, v in extra.items():
            out[k] = merge(out[k], v) if k in out else v
        return out
    return base


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=10_000)


def load_case(case: dict[str, Any], env: dict[str, str] | None = None, *, check_support: bool = False) -> Any:
    """Load a corpus case against the 1.5 format; ``check_support`` also refuses what this build cannot run."""
    fragment = yaml.safe_load(case["validated"]) or {}
    context = yaml.safe_load(case["context"]) if case["context"].strip() else {}
    env = env if env is not None else case["env"]
    if case["kind"] == "providers":
        return load_config_text(dump(context), env, providers_text=dump(fragment),
                                providers_path=Path("providers.yaml"), read_file=fake_read_file,
                                check_support=check_support)
    return load_config_text(dump(merge(fragment, context)), env, read_file=fake_read_file,
                            check_support=check_support)


def test_corpus_is_not_empty() -> None:
    assert len(FILES) >= 38


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_seed_example_validates(path: Path) -> None:
    case = parse_corpus(path)
    env = dict(case["env"])
    if "LLM_GATEWAY_HOST" in env:
        env["LLM_GATEWAY_HOST"] = "llm-gateway.example.com"
    try:
        load_case(case, env)
    except ConfigError as e:
        pytest.fail(f"{path.name} should validate:\n" + "\n".join(e.faults))
    # This build: the example boots, or every fault is a key this build lists as unsupported.
    try:
        load_case(case, env, check_support=True)
    except ConfigError as e:
        for fault in e.faults:
            assert fault.endswith("is not supported in this build; see docs/unsupported-keys.md"), fault


def test_full_example_verbatim_names_its_one_fault() -> None:
    """The seed's full example omits plugins.enabled for its sqlite store: exactly that row fires."""
    case = parse_corpus(CORPUS / "001-full-annotated-example.yaml")
    with pytest.raises(ConfigError) as exc:
        load_config_text(case["fragment"], case["env"])
    assert exc.value.faults == [
        "config.yaml: store.module: 'sqlite' is a kind: store plugin but plugins.enabled is false; set "
        "plugins.enabled: true and install its tarball in plugins.dir"]


def test_full_example_with_plugins_enabled_validates_with_exactly_its_warnings() -> None:
    case = parse_corpus(CORPUS / "001-full-annotated-example.yaml")
    loaded = load_case(case)
    assert loaded.warnings == [
        "config.yaml: pools.smart: heterogeneous pool (members speak anthropic, gemini, openai); "
        "cross-protocol translation applies",
        "config.yaml: pools.overflow: heterogeneous pool (members speak anthropic, openai); cross-protocol "
        "translation applies",
        "config.yaml: pools.batch: heterogeneous pool (members speak anthropic, openai); cross-protocol "
        "translation applies",
    ]
    cfg = loaded.config
    assert cfg.pools["smart"].on_exhausted.fallback_pool == "overflow"
    assert cfg.pools["overflow"].on_exhausted == "least_bad"
    assert cfg.pools["batch"].hooks == ["cheapest"]
    assert cfg.auth.modules("admin_auth")[0].token.env == "BUSBAR_ADMIN_TOKEN"
    assert cfg.metrics is not None and cfg.metrics.buffer_seconds == 60
    assert cfg.per_request_fee == 1


def test_full_example_boots_with_every_key_supported() -> None:
    """Every key of the seed's full annotated example is honoured by this build: the support check
    (what the boot and ``--validate`` run) refuses nothing."""
    case = parse_corpus(CORPUS / "001-full-annotated-example.yaml")
    loaded = load_case(case, check_support=True)
    assert loaded.config.observability.request_log_webhook_url == "https://logs.example.com/busbar"


def test_minimal_example_defaults() -> None:
    """The minimal config of README.md: listen defaults to 0.0.0.0:8080, no auth gate, no pools."""
    loaded = load_case(parse_corpus(CORPUS / "001-minimal-example.yaml"), check_support=True)
    cfg = loaded.config
    assert cfg.listen == "0.0.0.0:8080" and cfg.admin_listen == "127.0.0.1:8081"
    assert cfg.auth.chain == [] and cfg.pools == {}
    assert loaded.warnings == ["config.yaml: auth.chain: [] is an open front door: no client authentication "
                               "(development only)"]
