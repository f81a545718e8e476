"""Typed models of the management messages (configure, describe, status) and their replies.

On the sidecar wire a management message is recognised by a top-level ``configure``,
``describe`` or ``status`` key; in-process it is the same dict over ``busbar_call``.

Source: docs/hooks.md#management-messages
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "METRIC_NAME_PATTERN",
    "ConfigureAck",
    "ConfigureBody",
    "ConfigureMessage",
    "DescribeMessage",
    "DescribeReply",
    "Metric",
    "StatusMessage",
    "StatusReply",
]

METRIC_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConfigureBody(_Wire):
    """The pushed desired state: instance name, opaque settings, their version, Busbar's version."""

    hook: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    settings_version: int
    busbar_version: str = ""


class ConfigureMessage(_Wire):
    """``{"configure": {...}}``; answer :class:`ConfigureAck` echoing ``settings_version`` exactly."""

    configure: ConfigureBody


class DescribeMessage(_Wire):
    """``{"describe": true}``; answer :class:`DescribeReply` or ``{}``."""

    describe: Literal[True] = True


class StatusMessage(_Wire):
    """``{"status": true}``; answer :class:`StatusReply` or ``{}`` (unsupported)."""

    status: Literal[True] = True


class ConfigureAck(_Reply):
    """``{"ack": {"settings_version": N}}``."""

    settings_version: int

    def to_wire(self) -> dict[str, Any]:
        return {"ack": {"settings_version": self.settings_version}}


class DescribeReply(_Reply):
    """``{"schema": <settings JSON Schema>}`` (``None`` serializes as ``{}``)."""

    json_schema: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {} if self.json_schema is None else {"schema": self.json_schema}


class Metric(_Reply):
    """One Prometheus/OpenMetrics-shaped self-reported metric. Only name, type, value required."""

    name: str = Field(pattern=METRIC_NAME_PATTERN)
    type: Literal["counter", "gauge", "histogram"]
    value: float
    labels: dict[str, str] | None = None
    quantiles: dict[str, float] | None = None
    estimated: bool | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    label: str | None = None
    unit: str | None = None
    viz: Literal["counter", "gauge", "sparkline", "histogram"] | None = None
    max: float | None = None
    help: str | None = None


class StatusReply(_Reply):
    """``{"status": {"settings_version", "settings", "metrics": [...]}}``."""

    settings_version: int
    settings: dict[str, Any] = Field(default_factory=dict)
    metrics: tuple[Metric, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"status": {"settings_version": self.settings_version, "settings": self.settings,
                           "metrics": [m.model_dump(mode="json", exclude_none=True) for m in self.metrics]}}
