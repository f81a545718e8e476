"""tools/build-plugins builds and signs both first-party hook plugins, and the kernel's own loader
accepts them as ``first-party`` with zero trust configuration and runs them.

Source: docs/releasing.md#first-party-plugins; docs/hooks-firstparty.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from busbar.config.schema_plugins import PluginsConfig
from busbar.loader import load_plugins, unload
from busbar.loader.unpack import Staging
from busbar_sdk import HookPlugin, Order
from busbar_sdk.artifact import public_key_from_seed, read_artifact
from busbar_sdk.sidecar import start

from tests.plugins_firstparty.support import REPO, per_request, prompt_request, request


def test_build_plugins_signs_both_and_the_kernel_loads_them(tmp_path: Path) -> None:
    out = tmp_path / "plugins"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BUSBAR_RELEASE")}
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "build-plugins"),
                           "--key-file", str(tmp_path / "release.key"),
                           "--pubkey-module", str(tmp_path / "_release_pubkey.py"), "--out", str(out)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    built = sorted(p.name for p in out.iterdir())
    assert {"busbar-headroom-hook-1.5.0.tar.gz", "busbar-webrequest-hook-1.5.0.tar.gz"} <= set(built)
    manifests = {read_artifact((out / n).read_bytes()).manifest.name: read_artifact((out / n).read_bytes()).manifest
                 for n in built}
    assert manifests["busbar-webrequest-hook"].needs.prompt == "rw"
    assert manifests["busbar-headroom-hook"].settings_schema is not None

    public = public_key_from_seed((tmp_path / "release.key").read_text().strip())
    cfg = PluginsConfig.model_validate({"enabled": True, "dir": str(out)})
    ps = load_plugins(cfg, base_dir=tmp_path, release_key=bytes.fromhex(public), staging=Staging(tmp_path / "stage"))
    sidecar = start(_Echo)
    try:
        webrequest = ps.get("busbar-webrequest")
        headroom = ps.get("busbar-headroom")
        assert webrequest is ps.get("busbar-webrequest-hook") and headroom is ps.get("busbar-headroom-hook")
        assert webrequest.verdict == headroom.verdict == "first-party"

        fwd = webrequest.open({"url": sidecar.url + "/rank"}, prompt="ro")
        assert fwd.call(per_request("decide", request(), [{"idx": 0}, {"idx": 1}])) == {"order": [1, 0]}

        compressor = headroom.open({}, prompt="rw")
        log = "\n".join(f"row {i}   value   {i * 7}" for i in range(400))
        history = [("user", "data:\n```\n" + log + "\n```"), ("assistant", "ok"), ("user", "again:\n```\n" + log + "\n```"),
                   ("assistant", "same"), ("user", "thanks")]
        reply = compressor.call(per_request("transform", prompt_request(history)))
        assert "[headroom: repeated verbatim in message 3 below;" in reply["rewrite"]["messages"][0]["content"]
    finally:
        sidecar.close()
        unload(ps)


class _Echo(HookPlugin):
    """The sidecar: order the candidates last-to-first."""

    def decide(self, message):
        return Order(order=[c.idx for c in reversed(message.candidates)])
