"""The front door: who is calling (docs/auth.md).

Modules, one job each:

- :mod:`busbar.auth.identity`: :class:`~busbar.auth.identity.Identity`, what the chain resolved.
- :mod:`busbar.auth.tokens`: the ``bbk_`` virtual-key token codec (mint and verify, ed25519).
- :mod:`busbar.auth.signing`: the signing keyring (``auth.signing_key``, or generated on first boot).
- :mod:`busbar.auth.extract`: which token the caller presented (the header order).
- :mod:`busbar.auth.keys`: the built-in ``keys`` chain module (token + the store mirror).
- :mod:`busbar.auth.sigv4`: Bedrock ingress, AWS SigV4 signatures made with a key's AWS credential.
- :mod:`busbar.auth.plugin`: a ``kind: auth`` plugin as a chain module; :mod:`busbar.auth.roles`: role bindings.
- :mod:`busbar.auth.chain`: :class:`~busbar.auth.chain.FrontDoor`, the chain run per request.
- :mod:`busbar.auth.refusal`: the native 401/403 answers per protocol.
- :mod:`busbar.auth.passthrough`: ``auth.upstream_credentials: passthrough``.
- :mod:`busbar.auth.boot`: builds ``gw.frontdoor`` and ``gw.signing`` at start-up.
"""
