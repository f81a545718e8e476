"""Security primitives shared by every egress path.

- :mod:`busbar.security.ssrf`: the public SSRF-guard API (import from here).
- :mod:`busbar.security.hosts`: host canonicalization and address classes (pure).
- :mod:`busbar.security.policy`: :class:`SsrfPolicy` verdicts (pure).
- :mod:`busbar.security.transport`: the connect-time-guarded httpx transport.

Source: seeds 001 "security"; ORIGINAL.md §2.18; docs/security.md.
"""
