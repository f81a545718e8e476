"""hello-order: the smallest hook plugin. A gate that ranks the candidates last-to-first.

Packed and loaded by tests/plugins/test_plugin_example.py; see README.md next to this file.
"""
from __future__ import annotations

from busbar_sdk import HookPlugin, Order, export_plugin
from busbar_sdk.models import DecideMessage


class HelloOrder(HookPlugin):
    """Reply ``{"order": [...]}`` with the candidates' ``idx`` in reverse."""

    def decide(self, message: DecideMessage) -> Order:
        return Order(order=[c.idx for c in reversed(message.candidates)])


plugin = export_plugin(HelloOrder)
