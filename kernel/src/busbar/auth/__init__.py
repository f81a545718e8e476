"""The front door: who is calling (docs/auth.md).

Modules, one job each:

- :mod:`busbar.auth.identity`: :class:`~busbar.auth.identity.Identity`, what the chain resolved.
- :mod:`busbar.auth.tokens`: the ``bbk_`` virtual-key token codec (mint and verify, ed25519).
- :mod:`busbar.auth.signing`: the signing keyring (``auth.signing_key``, or generated on first boot).
"""
