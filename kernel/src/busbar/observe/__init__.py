"""What an operator sees of a running gateway: the access log, state-change logs, traces, request-log
sinks.

- :mod:`busbar.observe.logformat`: ``--log-format text|json`` for every log line.
- :mod:`busbar.observe.access`: one ``busbar.access`` line per data-plane request (a finisher on
  ``busbar.proxy.record.RequestRecord``).
- :mod:`busbar.observe.watch`: breaker transitions and hard-down latches, logged once per change and
  rate-limited per lane.
- :mod:`busbar.observe.traces`: OTLP/HTTP spans (``observability.otlp_url``).
- :mod:`busbar.observe.sinks`: the request-log webhook and the JSONL request-log file.

Source: docs/operations.md#seeing-requests
"""
