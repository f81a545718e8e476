"""The forwarder's SSRF guard gives the kernel's verdicts, reason for reason.

A plugin cannot import the kernel, so ``busbar_webrequest_hook._ssrf`` re-implements the kernel's
``busbar.security`` rules for the sidecar egress class (``allow_private=False``). This test runs
both over one table of URLs and one table of resolver answers: any drift fails here.

Source: seeds 001 "Startup validation summary" (Hook busbar-webrequest SSRF-blocked); seeds 003
"Webrequest"; ORIGINAL.md §2.18; handout C032.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from busbar.security.ssrf import SsrfBlocked, SsrfPolicy

from tests.plugins_firstparty.support import REPO

_PATH = REPO / "plugins" / "busbar-webrequest-hook" / "src" / "busbar_webrequest_hook" / "_ssrf.py"


def _load_guard():
    # The module has no intra-package imports: load it under a private name, so it never collides
    # with a copy the plugin importer loads in another test.
    spec = importlib.util.spec_from_file_location("busbar_webrequest_ssrf_under_test", _PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


guard = _load_guard()

URLS = [
    "http://127.0.0.1:8787/", "http://127.0.0.2/", "http://[::1]:9000/hook", "http://localhost:4318/v1",
    "http://LOCALHOST./x", "http://router.localhost:1/", "https://hooks.example.com/rtr",
    "https://user:secret@hooks.example.com/", "https://bücher.de/", "http://hooks.example.com/",
    "http://8.8.8.8/", "https://8.8.8.8/", "https://10.0.0.5/hook", "https://172.20.0.3/hook",
    "http://192.168.0.2/hook", "https://198.18.0.1/", "https://100.64.0.1/hook", "https://[fd00::1]/hook",
    "https://[fd12:3456::1]/v1", "https://169.254.10.10/hook", "http://169.254.169.254/latest/",
    "https://2852039166/", "https://0xA9FEA9FE/", "https://0251.0376.0251.0376/", "https://169.254.43518/",
    "https://[::ffff:169.254.169.254]/", "https://[::ffff:a9fe:a9fe]/", "https://metadata.google.internal/x",
    "https://METADATA.GOOGLE.INTERNAL./", "https://metadata/", "https://instance-data/",
    "https://100.100.100.200/", "https://168.63.129.16/", "https://192.0.0.192/", "https://[fd00:ec2::254]/",
    "https://[fe80::2]/hook", "http://[fe80::1]/", "https://255.255.255.255/hook", "https://0.0.0.0/",
    "https://224.0.0.1/", "https://240.0.0.1/", "https://192.0.2.1/", "https://[2001:db8::1]/",
    "https://[64:ff9b::a00:1]/", "https://[2002:a00:1::]/", "https://[::127.0.0.1]/", "https://012.0.0.1/hook",
    "https://%31%30.0.0.1/", "https://１０.０.０.１/", "http://evil.example\\@169.254.169.254/",
    "http://a@b@169.254.169.254/", "https://api.openai.com /v1", "https://api.openai.com\n.evil/",
    "https://1.2.3.999/", "https:///v1", "ftp://127.0.0.1/", "file:///etc/passwd", "127.0.0.1:8787",
    "", "https://[::1", "gopher://localhost/", "https://host.docker.internal/", "http://host.docker.internal/",
]


def _kernel(url: str, allow: tuple[str, ...] = ()) -> str | None:
    try:
        SsrfPolicy(allow_metadata_hosts=allow).check_url(url, purpose="settings.url", allow_private=False)
    except SsrfBlocked as e:
        return e.reason
    return None


def _plugin(url: str, allow: tuple[str, ...] = ()) -> str | None:
    try:
        guard.check_url(url, purpose="settings.url", allow=guard.HostSet.parse(allow, "settings.allow_hosts"))
    except guard.SsrfBlocked as e:
        return e.reason.replace("allow_hosts", "allow_metadata_hosts")
    return None


@pytest.mark.parametrize("url", URLS, ids=[repr(u) for u in URLS])
def test_config_time_verdicts_match_the_kernel(url: str) -> None:
    assert _plugin(url) == _kernel(url)


@pytest.mark.parametrize(("url", "allow"), [
    ("http://10.0.0.5:8080/", ("10.0.0.5",)), ("https://10.0.0.5/", ("10.0.0.0/8",)),
    ("http://169.254.169.254/", ("169.254.169.254",)), ("http://sidecar.internal/", ("sidecar.internal",)),
    ("https://192.168.1.1/", ("10.0.0.0/8",)), ("http://2852039166/", ("169.254.169.254",)),
])
def test_allow_list_verdicts_match_the_kernel(url: str, allow: tuple[str, ...]) -> None:
    assert _plugin(url, allow) == _kernel(url, allow)


RESOLVED = [
    ("sidecar.example.com", ["93.184.216.34"]), ("sidecar.example.com", ["93.184.216.34", "2606:2800::1"]),
    ("sidecar.example.com", ["10.0.0.5"]), ("sidecar.example.com", ["93.184.216.34", "169.254.169.254"]),
    ("sidecar.example.com", ["127.0.0.1"]), ("sidecar.example.com", ["::ffff:10.1.1.1"]),
    ("sidecar.example.com", ["100.64.1.1"]), ("sidecar.example.com", ["fe80::1"]),
    ("sidecar.example.com", ["0.0.0.0"]), ("sidecar.example.com", ["not-an-ip"]),
    ("localhost", ["127.0.0.1", "::1"]), ("localhost", ["10.0.0.1"]), ("a.localhost", ["8.8.8.8"]),
    ("127.0.0.1", ["127.0.0.1"]), ("metadata.google.internal", ["8.8.8.8"]),
    ("sidecar.example.com", ["64:ff9b::a9fe:a9fe"]), ("sidecar.example.com", ["2002:c0a8:101::1"]),
    ("bad host!", ["8.8.8.8"]),
]


@pytest.mark.parametrize(("host", "addresses"), RESOLVED, ids=[f"{h}->{a}" for h, a in RESOLVED])
def test_connect_time_verdicts_match_the_kernel(host: str, addresses: list[str]) -> None:
    try:
        kernel = [str(ip) for ip in SsrfPolicy().check_resolved(host, addresses, purpose="settings.url",
                                                                allow_private=False)]
    except SsrfBlocked as e:
        kernel = e.reason  # type: ignore[assignment]
    try:
        plugin = [str(ip) for ip in guard.check_resolved(host, addresses, purpose="settings.url")]
    except guard.SsrfBlocked as e:
        plugin = e.reason.replace("allow_hosts", "allow_metadata_hosts")  # type: ignore[assignment]
    assert plugin == kernel


def test_the_builtin_denylist_is_the_kernels() -> None:
    from busbar.security.ssrf import BUILTIN_METADATA_HOSTS
    assert guard.BUILTIN_METADATA_HOSTS == BUILTIN_METADATA_HOSTS


def test_json_depth_scan_is_linear_and_ignores_strings() -> None:
    spec = importlib.util.spec_from_file_location("busbar_webrequest_reply_under_test",
                                                  Path(_PATH).with_name("_reply.py"))
    assert spec and spec.loader
    reply = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reply)
    assert reply.json_depth(b'{"a":[1,{"b":"[[[[{{{{"}],"c":"\\"[["}') == 3
    assert reply.json_depth(b"[" * 100000) == 100000
    with pytest.raises(reply.ReplyError, match="nests 300 levels"):
        reply.parse_reply(b"[" * 300 + b"]" * 300, max_depth=256)
