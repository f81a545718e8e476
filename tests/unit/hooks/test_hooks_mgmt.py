"""Management messages: configure (exact-echo ack), describe (schema), status (bounded metrics).

Source: docs/hooks.md#management-messages
"""
from __future__ import annotations

import math
import threading
import time

import pytest
from busbar import __version__
from busbar.hooks.mgmt import is_ack, read_metric, read_status

CFG = """
pools:
  p:
    hooks: [ { module: g, timeout_ms: 1000, settings: { threshold: 3 } } ]
    members: [ { model: big } ]
"""


def wait_for(pred, timeout=2.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.005)
    return False


async def test_boot_pushes_configure_with_identity_settings_and_versions(bed_factory):
    bed = bed_factory(CFG, {"g": lambda p, s: {}})
    plugin = bed.plugins["g"]
    assert wait_for(lambda: plugin.mgmt_seen)
    assert plugin.mgmt_seen[0] == {"configure": {"hook": "g", "settings": {"threshold": 3}, "settings_version": 1,
                                                 "busbar_version": __version__}}
    facade = bed.gw.hooks.facades[0]
    assert wait_for(lambda: facade.acked_version == 1)


@pytest.mark.parametrize("reply,ok", [
    ({"ack": {"settings_version": 2}}, True),
    ({"ack": {"settings_version": 2}, "note": "extra fields are fine"}, True),
    ({"ack": {"settings_version": 1}}, False),
    ({"ack": {"settings_version": "2"}}, False),
    ({"ack": {"settings_version": 2.0}}, False),
    ({"ack": {"settings_version": True}}, False),
    ({"ack": 2}, False), ({}, False), ([], False), (None, False),
], ids=["exact", "extra", "stale", "str", "float", "bool", "flat", "empty", "list", "none"])
async def test_configure_commits_only_on_the_exact_ack(bed_factory, reply, ok):
    bed = bed_factory(CFG, {"g": lambda p, s: {}})
    facade = bed.gw.hooks.facades[0]
    assert wait_for(lambda: facade.acked_version == 1)
    bed.plugins["g"].mgmt = lambda p, s: reply
    assert facade.configure({"threshold": 9}, 2) is ok
    assert (facade.settings, facade.settings_version) == (({"threshold": 9}, 2) if ok else ({"threshold": 3}, 1))


async def test_configure_deadline_and_crash_are_no_ack(bed_factory):
    bed = bed_factory(CFG, {"g": lambda p, s: {}})
    facade = bed.gw.hooks.facades[0]
    release = threading.Event()
    bed.plugins["g"].mgmt = lambda p, s: release.wait(2) and {"ack": {"settings_version": 5}}
    t = time.monotonic()
    assert facade.configure({}, 5, timeout_s=0.1) is False and time.monotonic() - t < 0.5
    release.set()

    def boom(p, s):
        raise RuntimeError("x")
    bed.plugins["g"].mgmt = boom
    assert facade.configure({}, 6) is False and facade.settings_version == 1


async def test_describe(bed_factory):
    bed = bed_factory(CFG, {"g": lambda p, s: {}})
    facade = bed.gw.hooks.facades[0]
    schema = {"type": "object", "properties": {"threshold": {"type": "integer"}}}
    bed.plugins["g"].mgmt = lambda p, s: {"schema": schema} if "describe" in p else {}
    assert facade.describe() == schema
    bed.plugins["g"].mgmt = lambda p, s: {}
    assert facade.describe() is None
    bed.plugins["g"].mgmt = lambda p, s: {"schema": "not an object"}
    assert facade.describe() is None


def test_is_ack_requires_the_exact_version():
    assert is_ack({"ack": {"settings_version": 7}}, 7) and not is_ack({"ack": {"settings_version": 8}}, 7)


def good(i=0, **kw):
    return {"name": f"m_{i}_total", "type": "counter", "value": i, **kw}


def test_status_bounds_and_drift():
    metrics = [good(i) for i in range(70)]
    r = read_status({"status": {"settings_version": 3, "settings": {"a": 1}, "metrics": metrics}}, desired_version=3)
    assert r is not None
    assert len(r.metrics) == 64 and r.dropped == 6 and r.drift == "in_sync" and r.settings == {"a": 1}
    assert read_status({"status": {"settings_version": 2, "metrics": []}}, desired_version=3).drift == "drift"
    assert read_status({"status": {"metrics": []}}, desired_version=3).drift == "unknown"
    assert read_status({}, desired_version=1) is None
    assert read_status({"status": True}, desired_version=1) is None
    assert read_status("garbage", desired_version=1) is None


@pytest.mark.parametrize("entry", [
    "not an object", {"type": "counter", "value": 1}, {"name": "Bad-Name", "type": "counter"},
    {"name": "9starts_with_digit", "type": "gauge"}, {"name": "x" * 65, "type": "gauge"},
    {"name": "ok_total", "type": "summary"}, {"name": "ok_total"},
], ids=["str", "no-name", "charset", "digit", "too-long", "bad-type", "no-type"])
def test_malformed_entry_is_dropped_whole(entry):
    r = read_status({"status": {"settings_version": 1, "metrics": [entry, good(1)]}}, desired_version=1)
    assert r.metrics == (good(1),) and r.dropped == 1


def test_malformed_optional_members_are_dropped_individually():
    entry = {"name": "lat_us", "type": "histogram", "value": math.nan,
             "labels": {f"k{i}": "v" for i in range(9)}, "quantiles": {"0.5": 12, "p99": 3},
             "estimated": "yes", "ci_low": math.inf, "ci_high": 35.7, "label": "\u202eLatency\x00", "unit": "u" * 40,
             "viz": "pie", "max": "100", "help": "h" * 300}
    assert read_metric(entry) == {"name": "lat_us", "type": "histogram", "ci_high": 35.7, "label": "Latency",
                                  "unit": "u" * 16, "help": "h" * 256}
    full = {"name": "chars_saved_total", "type": "counter", "value": 812000, "labels": {"pool": "chat"},
            "quantiles": {"0.5": 12, "0.95": 34, "0.99": 51}, "estimated": True, "ci_low": 27.7, "ci_high": 35.7,
            "label": "Characters saved", "unit": "%", "viz": "counter", "max": 100, "help": "..."}
    assert read_metric(full) == full
    smuggle = {"name": "x_total", "type": "counter", "value": 1, "labels": {"bad key": "v"}}
    assert read_metric(smuggle) == {"name": "x_total", "type": "counter", "value": 1}
    long_value = {"name": "x_total", "type": "counter", "labels": {"pool": "p" * 500 + "\u2028"}}
    assert read_metric(long_value)["labels"] == {"pool": "p" * 128}


async def test_status_through_the_facade(bed_factory):
    bed = bed_factory(CFG, {"g": lambda p, s: {}})
    facade = bed.gw.hooks.facades[0]
    bed.plugins["g"].mgmt = lambda p, s: ({"status": {"settings_version": 1, "settings": s,
                                                      "metrics": [good(1), "junk"]}} if "status" in p else {})
    r = facade.status()
    assert r.metrics == (good(1),) and r.dropped == 1 and r.drift == "in_sync" and r.settings == {"threshold": 3}
    bed.plugins["g"].mgmt = lambda p, s: {}
    assert facade.status() is None


async def test_an_acked_configure_moves_the_header_allowlist_and_credentials_are_refused_first(bed_factory):
    from tests.unit.hooks.test_hooks_projection import HEADER_SCHEMA

    cfg = CFG.replace("settings: { threshold: 3 }", "settings: { headers: [x-tenant] }")
    bed = bed_factory(cfg, {"g": lambda p, s: {}}, schemas={"g": HEADER_SCHEMA})
    facade = bed.gw.hooks.facades[0]
    assert wait_for(lambda: facade.acked_version == 1)
    assert facade.headers == ("x-tenant",)
    assert facade.settings_faults({"headers": ["x-tier", "Cookie"]}) == [
        "settings.headers[1]: 'Cookie' carries a credential; credentials are never projected to a hook "
        "(authorization, proxy-authorization, x-api-key, x-goog-api-key, api-key, cookie, set-cookie, x-amz-*): "
        "remove it"]
    bed.plugins["g"].mgmt = lambda p, s: {}                       # no ack: the allowlist stays
    assert facade.configure({"headers": ["x-tier"]}, 2) is False
    assert facade.headers == ("x-tenant",)
    bed.plugins["g"].mgmt = None                                  # the polite ack
    assert facade.configure({"headers": ["X-Tier"]}, 3) is True
    assert facade.headers == ("x-tier",)
    await bed.send("p", "hi", headers={"x-tenant": "acme", "x-tier": "gold"})
    assert bed.seen("g")[-1]["request"]["headers"] == {"x-tier": "gold"}
