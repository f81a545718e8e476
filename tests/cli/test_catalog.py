"""The shipped provider catalog (kernel/src/busbar/catalog/providers.yaml; docs/catalog.md).

Every entry validates with the providers schema, its base URL passes the SSRF guard (config-time
verdict and the request-time host check the upstream client runs), and a config naming every
catalog provider passes ``busbar --validate``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml
from busbar.config.schema_base import PROTOCOLS
from busbar.config.schema_providers import CatalogProvider
from busbar.security.ssrf import HostGuard, SsrfPolicy

BUSBAR = str(Path(sys.executable).parent / "busbar")
CATALOG: dict = yaml.safe_load(
    resources.files("busbar.catalog").joinpath("providers.yaml").read_text("utf-8"))


def test_catalog_holds_the_1_5_entries():
    assert 110 <= len(CATALOG) <= 125
    for name in ("anthropic", "z.ai", "openai", "zai-api", "groq", "gemini", "bedrock", "responses", "cohere",
                 "mistral", "deepseek", "openrouter", "together", "fireworks", "xai", "moonshot", "zhipuai",
                 "oci-genai", "github-models", "huggingface", "wafer.ai", "302ai"):
        assert name in CATALOG, name
    assert CATALOG["z.ai"] == {"protocol": "anthropic", "base_url": "https://api.z.ai/api/anthropic",
                               "error_map": {"1113": "billing", "1302": "rate_limit"}}
    assert CATALOG["zai-api"] == {"protocol": "openai", "base_url": "https://api.z.ai/api/paas/v4",
                                  "path": "/chat/completions",
                                  "error_map": {"1113": "billing", "1302": "rate_limit"}}
    assert CATALOG["bedrock"]["protocol"] == "bedrock"
    assert CATALOG["bedrock"]["base_url"] == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert CATALOG["bedrock"]["error_map"]["ThrottlingException"] == "rate_limit"
    assert CATALOG["bedrock"]["error_map"]["ServiceQuotaExceededException"] == "billing"
    assert CATALOG["deepinfra"] == {"protocol": "openai", "base_url": "https://api.deepinfra.com/v1/openai",
                                    "path": "/chat/completions"}
    assert {e["protocol"] for e in CATALOG.values()} == set(PROTOCOLS)


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_entry_validates_and_its_base_url_passes_the_ssrf_guard(name):
    entry = CatalogProvider.model_validate(CATALOG[name])
    assert entry.protocol in PROTOCOLS
    url = entry.base_url
    assert url.startswith("https://") and not url.endswith("/"), url
    for field in ("path", "path_base"):
        value = getattr(entry, field)
        assert value is None or value.startswith("/")
    policy = SsrfPolicy()
    policy.check_url(url, purpose=f"provider {name}", allow_private=False)       # raises SsrfBlocked
    host = url[len("https://"):].split("/", 1)[0]
    HostGuard(policy, purpose="provider", allow_private=True).check_url_parts("https", host, None)


def test_a_config_naming_every_catalog_provider_validates(tmp_path):
    lines = ["providers:"] + [f'  "{n}": {{ api_key: {{ env: CATALOG_TEST_KEY }} }}' for n in CATALOG]
    lines += ["models:"] + [f'  m{i}: {{ provider: "{n}" }}' for i, n in enumerate(CATALOG)]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("auth: { chain: [] }\n" + "\n".join(lines) + "\n")
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "CATALOG_TEST_KEY": "k"}, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"busbar: {cfg} is valid")
    assert "providers" not in r.stderr and "base_url" not in r.stderr
