"""Fixtures for the router tests: the first-party rules (and AI router) hook plugins built from
their projects and packed as real signed tarballs (publisher ``acme``, a key made for the session),
a mock provider process and real busbar processes (the e2e fixtures)."""
from __future__ import annotations

from pathlib import Path

import pytest
from busbar_sdk.artifact import build_wheels, generate_signing_key

from tests.e2e.conftest import _clean_mock, gateway_factory, mock  # noqa: F401 - fixtures re-exported
from tests.plugins.helpers import run_pack

REPO = Path(__file__).resolve().parents[2]
KEY = generate_signing_key()

#: key -> (project dir, manifest name, alias, needs_prompt, needs_user)
PROJECTS = {
    "rules": ("busbar-rules-hook", "busbar-rules", "ro", "ro", "busbar_rules_hook"),
    "ai": ("busbar-ai-router-hook", "busbar-ai-router", "ro", "ro", "busbar_ai_router_hook"),
}


@pytest.fixture(scope="session")
def router_plugins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``(plugins dir, plugins: YAML block trusting it)``: every router plugin, built and signed once."""
    root = tmp_path_factory.mktemp("router-plugins")
    projects = [REPO / "plugins" / spec[0] for spec in PROJECTS.values()]
    wheels = build_wheels(projects, root / "wheels")
    plugdir = root / "plugins"
    plugdir.mkdir()
    for (name, alias, prompt, user, pkg), wheel in zip(PROJECTS.values(), wheels):
        schema = REPO / "plugins" / name / "src" / pkg / "settings_schema.json"
        status = run_pack(["pack", "--wheel", str(wheel), "--name", name, "--alias", alias, "--kind", "hook",
                           "--version", "1.5.0", "--publisher", "acme", "--needs-prompt", prompt,
                           "--needs-user", user, "--settings-schema-file", str(schema),
                           "--out", str(plugdir / f"{name}-1.5.0.tar.gz")], KEY[0])
        assert status == 0
    trust = (f'plugins: {{ enabled: true, dir: "{plugdir}", trust: {{ publishers: '
             f'[ {{ name: acme, public_key: "{KEY[1]}" }} ] }} }}\n')
    return plugdir, trust
