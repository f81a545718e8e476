"""Limits and spend: the group tree, windows, buckets, admission with reservations, the rate card.

- :mod:`busbar.limits.tree`: ``groups:`` as chains of limits (bucket names).
- :mod:`busbar.limits.cost`: ``rate_card`` / ``per_request_fee`` in integer pico/micro-units.
- :mod:`busbar.limits.engine`: ``Limiter`` (admit all-or-nothing, settle, windows, reservations).
- :mod:`busbar.limits.estimate`: a request's worst case from its body.
- :mod:`busbar.limits.replies`: refusals in the caller's dialect.
- :mod:`busbar.limits.gate`: ``Limits``, the data plane's seam (admit after identity, settle at the end).
- :mod:`busbar.limits.metrics`: Prometheus counters.

Source: docs/limits.md.
"""
