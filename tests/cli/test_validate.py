"""`busbar --validate`: exit 0 on a good config, 2 with one line per fault (key path + fix), no traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BUSBAR = str(Path(sys.executable).parent / "busbar")
ROOT = Path(__file__).resolve().parents[2]


def run(args, env=None):
    return subprocess.run([BUSBAR, *args], capture_output=True, text=True,
                          env={**os.environ, "K": "sk-test", **(env or {})}, timeout=60)


def test_quickstart_config_validates():
    quickstart_env = {"MOCK_OPENAI_KEY": "sk-mock-openai", "MOCK_ANTHROPIC_KEY": "sk-ant-api-mock"}
    r = run(["--validate", "--config", str(ROOT / "examples/quickstart/config.yaml")], env=quickstart_env)
    assert r.returncode == 0, r.stderr
    assert "config.yaml is valid" in r.stdout


def test_faults_one_line_each(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("""
providers:
  anthropic: { api_key: { env: K } }
  admin: { protocol: openai, base_url: https://x.example, api_key: { env: K } }
models:
  claude: { provider: anthropic, max_concurrent: 0 }
  orphan: { provider: missing }
pools:
  smart:
    members:
      - { model: claude }
      - { model: claude, weight: 0 }
      - { model: ghost }
    on_exhausted: { fallback_pool: smart }
    breaker: { base_cooldown_secs: 30, max_cooldown_secs: 10 }
    colour: blue
""")
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr
    assert lines == [
        "config.yaml: pools.smart.colour: unknown key (typo?); remove it or check the spelling in docs/config-at-a-glance.md",
        "busbar: 1 config error(s); refusing to start",
    ]
    cfg.write_text(cfg.read_text().replace("    colour: blue\n", ""))
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "config.yaml: providers.admin: the provider name 'admin' is reserved; rename it",
        "config.yaml: models.claude.max_concurrent: must be ≥ 1 (0 never grants a permit; omit it for unbounded)",
        "config.yaml: models.orphan.provider: 'missing' is not defined under providers; fix the name or add the provider",
        "config.yaml: pools.smart.members[1].weight: must be ≥ 1 (0 never selects the member; omit it for 1)",
        "config.yaml: pools.smart.members[2].model: 'ghost' is not defined under models; fix the name or add the model",
        "config.yaml: pools.smart.breaker.max_cooldown_secs: 10 is below base_cooldown_secs 30; raise it to ≥ the base",
        "config.yaml: pools.smart.on_exhausted.fallback_pool: 'smart' falls back to itself; name another pool",
        "busbar: 7 config error(s); refusing to start",
    ]


def test_unset_env_var_is_fatal(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text('providers:\n  openai: { base_url: "https://${NO_SUCH_HOST_VAR}", api_key: { env: K } }\n'
                   'models:\n  m: { provider: openai }\n')
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 2
    assert "unset environment variable: NO_SUCH_HOST_VAR" in r.stderr


def test_legacy_config_points_at_migrator(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("providers:\n  openai: { api_key: { env: K } }\nmodels:\n  m: { provider: openai }\n"
                   "pools:\n  p:\n    members:\n      - { target: m }\n")
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == ("config.yaml: pools.p.members[0].target: this looks like a Busbar "
                                        "1.x config; run busbar --migrate-config")


def test_missing_file(tmp_path):
    r = run(["--validate", "--config", str(tmp_path / "absent.yaml")])
    assert r.returncode == 2
    assert f"absent.yaml: file not found: {tmp_path / 'absent.yaml'}" in r.stderr


def test_http_to_public_host_and_metadata_refused(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("providers:\n"
                   "  a: { protocol: openai, base_url: 'http://api.example.com', api_key: { env: K } }\n"
                   "  b: { protocol: openai, base_url: 'http://169.254.169.254', api_key: { env: K } }\n"
                   "models:\n  m: { provider: a }\n")
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert lines[0].startswith("config.yaml: providers.a.base_url: ")
    assert lines[1].startswith("config.yaml: providers.b.base_url: ")


def test_warnings_print_and_validation_continues(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  m: { provider: anthropic }\n")
    r = run(["--validate", "--config", str(cfg)])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"busbar: {cfg} is valid (1 warning(s))"
    assert r.stderr.splitlines() == [
        "warning: config.yaml: auth.chain: [] is an open front door: no client authentication (development only)",
    ]


def test_unset_secret_reference_is_fatal_C034(tmp_path):
    """C034 (c): api_key { env: MY_KEY } with MY_KEY unset or empty is refused, naming MY_KEY and the key path."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("providers:\n  anthropic: { api_key: { env: MY_KEY } }\nmodels:\n  m: { provider: anthropic }\n")
    env = {k: v for k, v in os.environ.items() if k != "MY_KEY"}
    r = subprocess.run([BUSBAR, "--validate", "--config", str(cfg)], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "config.yaml: providers.anthropic.api_key: environment variable MY_KEY is not set; export MY_KEY (or "
        "point the reference at { file: /path })",
        "busbar: 1 config error(s); refusing to start"]
    r = run(["--validate", "--config", str(cfg)], env={"MY_KEY": ""})
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == ("config.yaml: providers.anthropic.api_key: environment variable MY_KEY is "
                                        "empty; set MY_KEY to the secret")
    cfg.write_text(cfg.read_text().replace("{ env: MY_KEY }", '"${MY_KEY}"'))
    r = run(["--validate", "--config", str(cfg)], env={"MY_KEY": "sk-test"})
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == (
        "config.yaml: providers.anthropic.api_key: must be a secret reference: { env: VAR }, { file: /path } or "
        "{ module: <secret-plugin>, settings: {...} }, found a plain string; write { env: VAR } in place of "
        "\"${VAR}\" or a literal key")
    assert "sk-test" not in r.stderr


def test_print_schema():
    import json

    r = run(["--print-schema"])
    assert r.returncode == 0, r.stderr
    schema = json.loads(r.stdout)
    assert schema["title"] == "Busbar config.yaml" and schema["additionalProperties"] is False
    r = run(["--print-schema", "providers"])
    assert json.loads(r.stdout)["title"] == "Busbar providers.yaml"
