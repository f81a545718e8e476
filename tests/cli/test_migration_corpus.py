"""Real configs the original Busbar shipped, run through ``busbar --migrate-config`` then ``--validate``
against this build's shipped catalog (tests/data/migration-corpus/README.md has their provenance).

Each file migrates with exit 0. The migrator cannot choose where the signing key lives, so the test
supplies exactly that decision (the migrated ``signing_key`` file path is pointed at a temporary key
file) and sets every ``{ env: VAR }`` the file names. A file in ``VALID`` then validates (exit 0);
a file in ``EXPECTED_FAILURES`` is refused with exactly the listed key paths, each for a documented
reason that is a migrator gap, never the catalog: no file may fail on a provider name.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from busbar.auth.signing import generate_text

BUSBAR = str(Path(sys.executable).parent / "busbar")
CORPUS = Path(__file__).resolve().parents[1] / "data" / "migration-corpus"
ENV = {name: "corpus-test-secret" for name in (
    "BUSBAR_ADMIN_TOKEN", "BUSBAR_SIGNING_KEY", "ANTHROPIC_KEY", "ANTHROPIC_API_KEY", "OPENAI_KEY",
    "GEMINI_KEY", "ZAI_KEY")} | {"AWS_BEDROCK_CREDS": "AKIDCORPUS:SECRETCORPUS"}
SIGNING_KEY_PATHS = ("/var/lib/busbar/signing.key", "/run/secrets/busbar-signing.key")

VALID = ["v1.5.1_config.yaml"]
# file -> the key paths --validate refuses after migration (reasons: tests/data/migration-corpus/README.md)
EXPECTED_FAILURES = {
    "v1.5.3_config.yaml": ["pools.upstream_credentials", "identity-providers"],
    "v1.5.5_examples_claude-code-bedrock_config.yaml": [
        "pools.upstream_credentials", "advanced.response_headers", "identity-providers"],
    "main-09acb6a_examples_clean-config-1.5.0.yaml": [
        "rate_card.sonnet-anthropic.units", "pools.upstream_credentials", "pools.fast.upstream_credentials",
        "admin_require_mtls", "identity-providers"],
    "main-115742b_docker_config.yaml": ["identity-providers"],
    "main-57fab3b_docker_config.persistent.yaml": ["plugins.fetch", "identity-providers"],
}
_FAULT = re.compile(r"^config\.yaml: (?P<path>[^:]+): ")


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BUSBAR, *args], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **ENV})


def migrate_and_validate(name: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    m = run(["--migrate-config", str(CORPUS / name)])
    assert m.returncode == 0, m.stderr
    assert "Traceback" not in m.stderr
    key = tmp_path / "signing.key"
    key.write_text(generate_text())          # a real ed25519 key: --validate parses it
    text = m.stdout
    for path in SIGNING_KEY_PATHS:
        text = text.replace(path, str(key))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    return run(["--validate", "--config", str(cfg)])


def test_every_corpus_file_is_classified():
    files = sorted(p.name for p in CORPUS.glob("*.yaml"))
    assert files == sorted(VALID + list(EXPECTED_FAILURES))
    assert any("bedrock" in (CORPUS / f).read_text() for f in VALID)
    assert any("z.ai" in (CORPUS / f).read_text() for f in VALID)


UNSUPPORTED = "is not supported in this build; see docs/unsupported-keys.md"


@pytest.mark.parametrize("name", VALID)
def test_migrated_config_validates_against_the_shipped_catalog(name, tmp_path):
    """Valid 1.5 configs; the only refusals left are keys this build lists as unsupported
    (docs/unsupported-keys.md: the auth chain, the admin chain, the signing key)."""
    v = migrate_and_validate(name, tmp_path)
    faults = [line for line in v.stderr.splitlines() if _FAULT.match(line)]
    assert all(line.endswith(UNSUPPORTED) for line in faults), v.stderr
    assert v.returncode == (2 if faults else 0)
    assert "provider catalog" not in v.stderr and "Traceback" not in v.stderr


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_expected_failures_are_migrator_gaps_not_the_catalog(name, tmp_path):
    v = migrate_and_validate(name, tmp_path)
    assert v.returncode == 2
    faults = [m.group("path") for line in v.stderr.splitlines() if (m := _FAULT.match(line))]
    assert faults == EXPECTED_FAILURES[name], v.stderr
    assert "provider catalog" not in v.stderr and "Traceback" not in v.stderr
