"""examples/hooks/hello-order: packed by busbar-plugin-pack from its project directory, loaded by
the kernel, answered through busbar_call; and the sdk harness loads it the same way."""
from __future__ import annotations

from pathlib import Path

from busbar_sdk.testing import assert_hook_conformance, decide_payload, load_packed

from tests.plugins.helpers import EXAMPLE, decide, make_cfg, run_pack


def test_example_packs_from_its_project_and_loads(plugdir: Path, keys, load) -> None:
    out = plugdir / "hello-order-0.1.0.tar.gz"
    status = run_pack(["pack", "--wheel", str(EXAMPLE), "--name", "hello-order", "--alias", "hello", "--kind",
                       "hook", "--version", "0.1.0", "--publisher", "acme", "--out", str(out)], keys["acme"][0])
    assert status == 0
    ps = load(make_cfg(keys))
    plugin = ps.get("hello")
    assert plugin is ps.get("hello-order") and plugin.kind == "hook" and plugin.verdict == "trusted"
    assert plugin.open({}).call(decide(3)) == {"order": [2, 1, 0]}
    # not installed into the environment: its module came from the private staging directory
    import hello_order
    assert plugin.directory is not None and Path(hello_order.__file__).is_relative_to(plugin.directory)


def test_example_through_the_sdk_harness(pack, tmp_path: Path, keys) -> None:
    tarball = pack(tmp_path / "h.tar.gz")
    with load_packed(tarball, public_key=keys["acme"][1], workdir=tmp_path / "work") as plugin:
        inst = plugin.open({})
        assert inst.call(decide_payload(candidates=2)) == {"order": [1, 0]}
        assert_hook_conformance(inst)
