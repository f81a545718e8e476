"""C034 / issue 11 item 18, end to end: a lane's `api_key: { env: MY_KEY }` reaches the provider as the
variable's value; unset or empty, the gateway refuses to start naming MY_KEY and the key path, so no
request is ever sent with an empty or placeholder credential."""
from __future__ import annotations

import json

import openai
import pytest

from tests.support.gateway import BusbarProcess

CONFIG = """\
listen: "127.0.0.1:{port}"
providers:
  up: { protocol: openai, base_url: MOCK, api_key: { env: MY_KEY } }
models:
  gpt-4o-mini: { provider: up }
"""


def test_C034_a_the_env_value_is_what_the_provider_receives(gateway_factory, mock) -> None:
    gw = gateway_factory(CONFIG, mock.url, env={"MY_KEY": "sk-test"})
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="client-side", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].finish_reason == "stop"
    (req,) = mock.requests()
    assert req["headers"]["authorization"] == "Bearer sk-test"
    sent = json.dumps(req)
    assert "${" not in sent and "os.environ/" not in sent


@pytest.mark.parametrize(("env", "line"), [
    ({}, "config.yaml: providers.up.api_key: environment variable MY_KEY is not set; export MY_KEY (or point the "
         "reference at { file: /path })"),
    ({"MY_KEY": ""}, "config.yaml: providers.up.api_key: environment variable MY_KEY is empty; set MY_KEY to the "
                     "secret"),
], ids=["unset", "empty"])
def test_C034_c_an_unset_or_empty_secret_refuses_the_boot(env, line, mock, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    gw = BusbarProcess(CONFIG.replace("MOCK", mock.url), tmp_path, env=env)
    try:
        with pytest.raises(RuntimeError, match="busbar exited 2"):
            gw.start()
    finally:
        gw.stop()   # closes the log file the failed start left open
    assert gw.logs().splitlines()[-2:] == [line.replace("config.yaml", gw.config_path.name),
                                           "busbar: 1 config error(s); refusing to start"]
    assert mock.requests() == []
