"""The kernel hands the deployment's ``security:`` policy to in-process plugins: Gateway.build sets
``busbar_sdk.ssrf.deployment_policy`` from the config before any hook or auth plugin opens."""
from __future__ import annotations

import httpx
from busbar.config.load import load_config_text
from busbar.proxy.gateway import Gateway
from busbar_sdk.ssrf import HostGuard, SsrfBlocked, SsrfPolicy, deployment_policy, set_deployment_policy

BASE = """\
providers:
  openai: { api_key: { env: K } }
models:
  gpt: { provider: openai }
pools:
  p: { members: [ { model: gpt } ] }
"""


def test_gateway_build_sets_the_policy_plugins_start_from() -> None:
    before = deployment_policy()
    try:
        text = BASE + "security:\n  allow_metadata_hosts: [169.254.169.254]\n  blocked_metadata_hosts: [10.9.9.9]\n"
        Gateway.build(load_config_text(text, {"K": "k"}), {"K": "k"},
                      transport=httpx.MockTransport(lambda r: httpx.Response(500)))
        guard = HostGuard(deployment_policy().with_allow_key("allow_hosts"), purpose="settings.url",
                          allow_private=False)
        guard.check_url("https://169.254.169.254/hook")        # allowed by the deployment's exception
        try:
            guard.check_url("https://10.9.9.9/hook")
        except SsrfBlocked as e:
            assert "cloud-metadata endpoint" in str(e)
        else:
            raise AssertionError("10.9.9.9 was not blocked")
    finally:
        set_deployment_policy(before)
    assert isinstance(before, SsrfPolicy)
