"""The generative AI router with auth on (``auth.chain: [keys]``): the router presents its own minted key
(``gateway_key: { env: T_ROUTER_KEY }``), the client its own.

The router's key is given at boot, so it is minted first: node A boots with wrong router keys and mints
the keys over its admin API into a shared sqlite store; node B boots on the same store (same signing
key, same key records) with the minted router keys in its environment. Keys (docs/auth.md#virtual-keys):

* the client's key may use the routed pools ``gen`` and ``gen-narrow`` only (not the router's models);
* the router's key may use the router's models ``r-small`` and ``r-big`` (a model addressed directly
  counts by its model name);
* the narrow router key may use ``r-big`` only: its call to ``r-small`` is the gateway's 403.

A 401/403 is not retried on that model (docs/router.md#the-generative-engine): the next model at once,
or the fallback chain, with reason ``denied`` counted and a warning naming ``gateway_key``.
"""
from __future__ import annotations

import shutil

import httpx
import openai
import pytest

from tests.e2e.test_hooks_e2e import HEAD
from tests.router.conftest import REPO
from tests.router.test_ai_router_generative_e2e import MODELS, answer, has_metric, metrics_are, models_called, pool
from tests.support.gateway import BusbarProcess, free_port
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.e2e]

ADMIN_TOKEN = "adm-router-auth-3e9"
WRONG_KEY = "bbk_not-a-key"
PLANE = """admin_listen: "127.0.0.1:{admin_port}"
auth:
  chain: [ keys ]
  admin_auth: [ { admin-tokens: { token: { env: T_ADMIN_TOKEN } } } ]
store: { module: sqlite, settings: { db_path: "DB" } }
"""
POOLS = "pools:\n  router-llms:\n    members: [ { model: r-small }, { model: r-big } ]\n" + "".join([
    pool("gen", "          gateway_key: { env: T_ROUTER_KEY }\n          min_confidence: 0.6\n"),
    pool("gen-narrow", "          gateway_key: { env: T_ROUTER_KEY_NARROW }\n"),
])


class Node(BusbarProcess):
    """A busbar process with the keys chain, an admin plane (own port) and the shared sqlite store."""

    def __init__(self, text: str, tmp_path, env: dict[str, str]) -> None:
        self.admin_port = free_port()
        super().__init__(text.replace("{admin_port}", str(self.admin_port)), tmp_path,
                         env={"T_ADMIN_TOKEN": ADMIN_TOKEN, "T_OPENAI_KEY": "sk-test-openai",
                              "T_ANTHROPIC_KEY": "sk-test-anthropic", "BUSBAR_STATE_FILE": "", **env})
        self.admin = httpx.Client(base_url=f"http://127.0.0.1:{self.admin_port}/api/v1/admin", timeout=30,
                                  headers={"authorization": f"Bearer {ADMIN_TOKEN}"})

    def mint(self, **fields) -> str:  # noqa: ANN003 - the admin API's mint body
        r = self.admin.post("/keys", json={"name": "router-test", **fields})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def stop(self) -> None:
        self.admin.close()
        super().stop()


def known(node: Node, token: str) -> None:
    """Wait until ``node``'s data plane accepts ``token`` (the keys mirror follows the store every
    0.25 s): a pool the key may not use is then the 403, no longer the 401."""
    probe = {"model": "no-such-pool", "messages": [{"role": "user", "content": "hi"}]}
    wait_until(lambda: httpx.post(node.url + "/v1/chat/completions", json=probe, timeout=5,
                                  headers={"authorization": f"Bearer {token}"}).status_code in (403, 404),
               what="the minted key synced")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, mock, router_plugins):
    plugdir, trust = router_plugins
    both = tmp_path_factory.mktemp("router-auth-plugins")
    for tarball in [*plugdir.glob("*.tar.gz"), REPO / "dist" / "plugins" / "busbar-store-sqlite-1.5.0.tar.gz"]:
        shutil.copy(tarball, both)
    tmp = tmp_path_factory.mktemp("router-auth")
    cfg = (HEAD.replace("models:\n", "models:\n" + MODELS.lstrip("\n")).replace("MOCK", mock.url)
           + trust.replace(str(plugdir), str(both)) + PLANE.replace("DB", str(tmp / "store.db")) + POOLS)
    a = Node(cfg, tmp, {"T_ROUTER_KEY": WRONG_KEY, "T_ROUTER_KEY_NARROW": WRONG_KEY}).start()
    nodes = [a]
    try:
        client = a.mint(allowed_pools=["gen", "gen-narrow"])
        router = a.mint(allowed_pools=["r-small", "r-big"])
        narrow = a.mint(allowed_pools=["r-big"])
        known(a, client)
        b = Node(cfg, tmp, {"T_ROUTER_KEY": router, "T_ROUTER_KEY_NARROW": narrow})
        nodes.append(b)
        b.start()
        known(b, client)
        yield a, b, client
    finally:
        for n in nodes:
            n.stop()


def ask(node: Node, token: str, pool_name: str, text: str) -> httpx.Response:
    """The client's request, with its own key, through the official SDK; the raw HTTP response."""
    with openai.OpenAI(base_url=node.url + "/v1", api_key=token, max_retries=0) as oa:
        return oa.chat.completions.with_raw_response.create(
            model=pool_name, messages=[{"role": "user", "content": text}]).http_response


LOG_LINE = ("busbar-ai-router-hook on pool gen: the gateway answered HTTP 401 to the router's call to model r-small: "
            "check settings.gateway_key (a valid Busbar key allowed the pool router-llms); the next model or the "
            "fallback chain serves meanwhile")


def test_the_router_key_is_its_own_and_its_call_orders_the_member(fleet, mock) -> None:
    _, b, client = fleet
    mock.script([{"match": {"model": "r-small"}, "response": {"text": answer(["math"], 0.9)}}])
    r = ask(b, client, "gen", "What is the derivative of x^3?")
    assert (r.status_code, r.headers["x-busbar-route-target"]) == (200, "m-math")
    routed, served = mock.requests()
    assert (routed["body"]["model"], served["body"]["model"]) == ("r-small", "m-math")
    metrics_are(b, "busbar_ai_model_fallback_total{", [], client)
    # the client's own key may not use the router's models: the router's call went with the router's key
    direct = httpx.post(b.url + "/v1/chat/completions", headers={"authorization": f"Bearer {client}"},
                        json={"model": "r-small", "messages": [{"role": "user", "content": "hi"}]})
    assert (direct.status_code, direct.json()["error"]["message"]) == (
        403, "this key may not use pool 'r-small': it is not in the key's allowed_pools")


def test_a_model_the_router_key_may_not_use_is_not_retried(fleet, mock) -> None:
    _, b, client = fleet
    mock.script([{"match": {"model": "r-big"}, "response": {"text": answer(["code"], 0.9)}}])
    r = ask(b, client, "gen-narrow", "Fix my build")
    assert (r.status_code, r.headers["x-busbar-route-target"]) == (200, "m-code")
    assert models_called(mock) == ["r-big", "m-code"]          # r-small: the gateway's 403, once, no upstream call
    metrics_are(b, "busbar_ai_model_fallback_total{", [
        'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen-narrow",reason="denied",'
        'to="r-big"} 1.0'], client)


def test_a_wrong_router_key_falls_back_and_is_counted_and_warned_once(fleet, mock) -> None:
    a, _, client = fleet
    mock.script([{"match": {"model": "r-small"}, "times": -1, "response": {"text": answer(["math"], 0.9)}}])
    for i in range(2):
        r = ask(a, client, "gen", f"Integrate x dx, take {i}")
        assert (r.status_code, r.headers["x-busbar-route-target"]) == (200, "m-chat")
    assert models_called(mock) == ["m-chat", "m-chat"]        # both router calls refused at the front door
    metrics_are(a, "busbar_ai_model_fallback_total{", [
        'busbar_ai_model_fallback_total{from="r-small",hook="busbar-ai-router",pool="gen",reason="denied",'
        'to="r-big"} 2.0'], client)
    has_metric(a, 'busbar_router_fallback_total{from="ai",hook="busbar-ai-router",pool="gen",reason="denied",'
                  'to="fallback[0]"} 2.0', client)
    log = a.log_path.read_text()
    assert log.count(LOG_LINE) == 1                           # once a minute per instance, not per request
    assert WRONG_KEY not in log
