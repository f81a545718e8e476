"""Boot/--validate rows of the front door owned by busbar.config.validate_auth."""
from __future__ import annotations

import pytest
from busbar.config.errors import ConfigError
from busbar.config.load import load_config_text

BASE = "providers:\n  anthropic: { api_key: { env: K } }\nmodels:\n  m: { provider: anthropic }\n"


def test_passthrough_with_the_keys_verifier_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        load_config_text(BASE + "auth: { chain: [keys], upstream_credentials: passthrough }\n", {"K": "k"},
                         check_support=True)
    assert e.value.faults == [
        "config.yaml: auth.upstream_credentials: passthrough forwards the caller's token upstream, and with keys "
        "in auth.chain that token is a Busbar key no provider accepts; use own, or drop keys from the chain"]


def test_passthrough_with_an_open_front_door_boots_and_keys_alone_warns_about_the_memory_store() -> None:
    assert load_config_text(BASE + "auth: { upstream_credentials: passthrough }\n", {"K": "k"},
                            check_support=True).config.auth.upstream_credentials == "passthrough"
    loaded = load_config_text(BASE + "auth: { chain: [keys] }\n", {"K": "k"}, check_support=True)
    assert [w for w in loaded.warnings if "store.module" in w] == [
        "config.yaml: store.module: the ephemeral memory store with the keys verifier: minted keys, usage and the "
        "revocation denylist reset on restart; choose a durable store.module"]


def test_an_unusable_signing_key_is_one_line_at_validate_and_boot(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    cfg = tmp_path / "config.yaml"
    cfg.write_text(BASE + "auth: { chain: [keys], signing_key: { env: SIGN } }\n")
    line = ("config.yaml: auth.signing_key: is neither PEM nor a base64 32-byte ed25519 seed; generate one with "
            "'openssl genpkey -algorithm ed25519'")
    with pytest.raises(ConfigError) as e:
        load_config_text(cfg.read_text(), {"K": "k", "SIGN": "not-a-key"}, check_support=True)
    assert e.value.faults == [line]
    busbar = str(Path(sys.executable).parent / "busbar")
    r = subprocess.run([busbar, "--validate", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env={"K": "k", "SIGN": "not-a-key", "PATH": "/usr/bin:/bin"}, check=False)
    assert r.returncode == 2 and r.stderr.splitlines()[0] == line
