"""Test a plugin the way the kernel runs it: pack it, load the tarball, drive it with payloads.

:func:`load_packed` runs the loader's pipeline on a real tarball: the structural validation
(:func:`busbar_sdk.artifact.read_artifact`), the signature check against the key you pass, the
``requires_dist`` check against the environment, the safe wheel extraction into a private directory,
the import through a plugin importer (never ``sys.path``), and the ABI binding with the kind
cross-check. What it skips is the operator's trust *policy* (publishers, opt-ins, floors), which
belongs to the kernel.

Example::

    from busbar_sdk.testing import decide_payload, load_packed, pack, throwaway_key

    def test_orders(tmp_path):
        seed, public = throwaway_key()
        tarball = pack("examples/hooks/hello-order", out=tmp_path / "p.tar.gz", name="hello-order",
                       alias="hello", kind="hook", signing_key=seed)
        with load_packed(tarball, public_key=public, workdir=tmp_path) as plugin:
            reply = plugin.open({}).call(decide_payload(candidates=3))
        assert reply == {"order": [2, 1, 0]}

The pytest plugin (:mod:`busbar_sdk.testing._pytest_plugin`, auto-registered) offers the same as
fixtures: ``busbar_signing_key``, ``busbar_pack``, ``busbar_load``.

The sdk ships this as a pytest plugin; see docs/plugins.md#testing.
"""
from __future__ import annotations

from busbar_sdk.testing._harness import (
                                         InstanceUnderTest,
                                         PluginUnderTest,
                                         assert_hook_conformance,
                                         decide_payload,
                                         load_packed,
                                         pack,
                                         throwaway_key,
)

__all__ = ["InstanceUnderTest", "PluginUnderTest", "assert_hook_conformance", "decide_payload", "load_packed",
           "pack", "throwaway_key"]
