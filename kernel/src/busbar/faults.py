"""``FaultList``: the one exception shape for "this cannot run, and here is every reason".

Config validation, plugin loading, hook wiring and boot each collect every fault before they
refuse, one line per fault naming the key path (or file) and the fix
(``docs/configuration.md``); they raise a subclass of ``FaultList`` so a caller can print all the
lines, and catch the stage it cares about by its own class.
"""

from __future__ import annotations

from collections.abc import Iterable


class FaultList(Exception):
    """Refusal with every fault found.

    Attributes:
        faults: one line per fault (``str()`` of the exception is the lines joined by newlines).
    """

    def __init__(self, faults: Iterable[str]) -> None:
        self.faults = list(faults)
        super().__init__("\n".join(self.faults))
