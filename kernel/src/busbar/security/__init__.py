"""Security primitives shared by every egress path.

- :mod:`busbar.security.ssrf`: the SSRF-guard API for kernel code (the pure policy is the sdk's
  :mod:`busbar_sdk.ssrf`, shared with plugins).
- :mod:`busbar.security.resolve`: resolve a host and check every address (the DNS seam).
- :mod:`busbar.security.connector`: the connect-time-guarded aiohttp connector of the request path.

See docs/security.md.
"""
