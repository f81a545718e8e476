"""Models of ``pools:`` (members, hooks, breaker, failover, on_exhausted, affinity) and hook refs.

Shapes, defaults and alias spellings only. Whether a member's model exists, a weight is ≥ 1, a
fallback chain terminates, a hook list names one strategy, ... is ``busbar.config.validate_pools`` /
``validate_hooks``.

YAML 1.1 reads a bare ``no`` as the boolean false: ``prompt: no`` / ``user: no`` arrive as ``False``
and are read back as ``"no"`` here.

Source: docs/config-at-a-glance.md#pools (docs/reliability.md#selection, docs/hooks.md#configuring,
docs/reliability.md#dispositions, docs/reliability.md#the-walk-and-the-first-byte-boundary,
docs/reliability.md#when-nothing-can-be-tried-on_exhausted,
docs/reliability.md#selection, docs/reliability.md#context-length-failover); docs/hooks.md#configuring,
docs/plugins.md#grants, docs/hooks.md#fail-safety.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Union

from pydantic import Field, field_validator

from busbar.config.schema_base import Strict, tagged_union


class MemberConfig(Strict):
    """A pool member: one model lane, its weight and its per-pool overrides."""

    model: str
    """Name of an entry under models: (required; renamed from the 1.x ``target``)."""
    weight: int = Field(default=1, json_schema_extra={"minimum": 1})
    """Relative SWRR share among the usable members; ≥ 1."""
    context_max: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    """This member's context window in tokens (context-length failover). Unset = unknown (always
    eligible)."""
    attempt_timeout_ms: int | None = Field(default=None, json_schema_extra={"minimum": 1})
    """Per-attempt time-to-headers cap in this pool, overriding the model's. ≥ 1 when set."""
    reasoning: bool | None = None
    """Per-pool override of the model's reasoning flag. Unset = the model's value."""
    tier: str | None = None
    """Routing tier label exposed to gate hooks (inert for plain weighted pools)."""
    tags: list[str] = Field(default_factory=list)
    """Free-form labels; the restrict arm intersects on them; exposed to gate hooks."""


class TripConfig(Strict):
    """``breaker.trip``: when a (pool, lane) breaker cell opens."""

    mode: Literal["error_rate", "consecutive"] = "error_rate"
    """error_rate: errors/total ≥ threshold over window_secs (with ≥ min_requests outcomes);
    consecutive: consecutive_n failures in a row."""
    window_secs: int = Field(default=30, json_schema_extra={"minimum": 1})
    """Sliding outcome window for error_rate (the only spelling; window_s is gone). ≥ 1."""
    threshold: float = Field(default=0.5, json_schema_extra={"exclusiveMinimum": 0, "maximum": 1})
    """Error fraction that trips in error_rate mode; in (0.0, 1.0]."""
    min_requests: int = Field(default=5, json_schema_extra={"minimum": 1})
    """Outcomes needed in the window before the threshold is evaluated. ≥ 1."""
    consecutive_n: int = Field(default=3, json_schema_extra={"minimum": 1})
    """Failures in a row that trip in consecutive mode (the only spelling; n is gone). ≥ 1."""


class BreakerConfig(Strict):
    """``breaker:`` per-(pool, lane) circuit breaker; defaults match ADR-0002."""

    trip: TripConfig = Field(default_factory=TripConfig)
    """The trip rule."""
    base_cooldown_secs: int = Field(default=15, json_schema_extra={"minimum": 1})
    """Cooldown after a trip; doubles per trip without recovery (±10% jitter). ≥ 1."""
    max_cooldown_secs: int = 120
    """Cooldown ceiling; ≥ base_cooldown_secs."""


class FailoverConfig(Strict):
    """``failover:`` bounds on retrying across members for one request."""

    timeout_secs: int = Field(default=120, json_schema_extra={"minimum": 1})
    """Wall-clock budget for the whole request across hops (the only spelling; deadline_secs is
    gone). ≥ 1."""
    max_hops: int = Field(default=3, json_schema_extra={"minimum": 0})
    """Max failover hops (attempts that fail before the first response byte). The only spelling;
    cap is gone."""
    exclusions: list[str] = Field(default_factory=list)
    """Member models never used as a failover destination; each must be a member of this pool."""


class AffinityConfig(Strict):
    """``affinity:`` pin a session to one member while it stays healthy (a preference)."""

    mode: str = "session"
    """session (the only supported value)."""
    header_name: str = "x-session-id"
    """Request header whose value identifies the session."""


class FallbackPool(Strict):
    """``on_exhausted: { fallback_pool: <pool> }``: run another pool's full selection."""

    fallback_pool: str
    """Name of another configured pool (no self-reference, no cycle)."""


_ON_EXHAUSTED_ALIASES = {
    "reject": "reject", "status_503": "reject", "status503": "reject", "503": "reject",
    "least_bad": "least_bad", "least-bad": "least_bad", "leastbad": "least_bad",
}
ON_EXHAUSTED_HINT = "must be reject, least_bad or { fallback_pool: <pool> }"


def _keyword_or_map(v: Any) -> str | None:
    if isinstance(v, (dict, FallbackPool)):
        return "~fallback"
    if isinstance(v, str):
        return "~keyword"
    return None


if TYPE_CHECKING:
    OnExhausted = Union[Literal["reject", "least_bad"], FallbackPool]
else:
    OnExhausted = tagged_union({"~keyword": Literal["reject", "least_bad"], "~fallback": FallbackPool},
                               _keyword_or_map, error="on_exhausted", message=ON_EXHAUSTED_HINT)


class OnErrorHook(Strict):
    """``on_error: { hook: <name> }``: when this gate fails, that hook fires in its place."""

    hook: str
    """The module (manifest name or alias) of another hook instance in scope (this pool's hooks and
    global_hooks), or a strategy name; the chain must terminate (proven at boot)."""


ON_ERROR_HINT = ("must be nothing, weighted, first, reject, a strategy name (cheapest, fastest, "
                 "least_busy, usage) or { hook: <name> }")


def _terminal_or_ref(v: Any) -> str | None:
    if isinstance(v, (dict, OnErrorHook)):
        return "~hook"
    if isinstance(v, str):
        return "~terminal"
    return None


if TYPE_CHECKING:
    OnError = Union[str, OnErrorHook]
else:
    OnError = tagged_union({"~terminal": str, "~hook": OnErrorHook}, _terminal_or_ref, error="on_error",
                           message=ON_ERROR_HINT)


def _yaml_no(v: Any) -> Any:
    return "no" if v is False else v


class HookRef(Strict):
    """An inline hook instance: ``{ module: <kind: hook plugin>, settings: {...}, kind?, ... }``.

    Lives in a pool's ``hooks:`` list (fires for that pool; default kind gate) or in ``global_hooks:``
    (fires on every request; default kind tap). Requires ``plugins.enabled: true``.
    """

    module: str
    """Manifest name or alias of a loaded kind: hook plugin (e.g. busbar-webrequest-hook)."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """The plugin's own opaque config (pushed via configure). Keys its manifest settings schema marks
    are checked at boot: required keys, and x-busbar-egress-url URLs SSRF-guarded (loopback allowed;
    remote must be https://)."""
    kind: Literal["tap", "gate"] | None = None
    """gate = fire-and-wait decision; tap = fire-and-forget observation. Unset: gate in a pool list,
    tap in global_hooks."""
    timeout_ms: int = Field(default=1, json_schema_extra={"minimum": 1})
    """Hard deadline for a gate decision, in ms; on timeout the decision is coerced to on_error. ≥ 1."""
    on_error: OnError = "nothing"
    """Fallback when a gate times out / errors / saturates: nothing | weighted | first | reject, a
    strategy name, or { hook: <name> } (a chain proven terminating at boot)."""
    on_empty: Literal["reject", "weighted"] = "reject"
    """A restrict gate's empty-intersection behaviour: reject (fail closed, 503) or weighted."""
    prompt: Literal["no", "ro", "rw"] = "no"
    """Prompt-content grant: ro sends the prompt read-only; rw also allows the rewrite arm (never on
    a tap)."""
    user: Literal["no", "ro"] = "no"
    """Caller-identity grant: key id/name and the body's end-user field (never the secret)."""
    priority: int = 0
    """Orders the rewrite chain and tie-breaks the reconcile."""
    at: Literal["request", "route", "attempt", "completion"] = "request"
    """Tap observation stage; inert on a gate."""
    shadow: bool = False
    """Gates only: fire the gate and log/count its verdict (busbar_gate_shadow_verdicts_total), but
    route as if it had abstained (its on_error never applies). For trying a new router beside the
    one it replaces."""

    @field_validator("prompt", "user", mode="before")
    @classmethod
    def _grant_no(cls, v: Any) -> Any:
        return _yaml_no(v)

    def effective_kind(self, *, in_global: bool) -> str:
        """``kind`` as written, else the position default (tap in global_hooks, gate in a pool)."""
        return self.kind or ("tap" if in_global else "gate")


HOOK_ENTRY_HINT = ("must be a built-in strategy name (weighted, cheapest, fastest, least_busy, usage) "
                   "or an inline { module: <hook plugin>, settings: {...} } ref")


def _strategy_or_ref(v: Any) -> str | None:
    if isinstance(v, (dict, HookRef)):
        return "~ref"
    if isinstance(v, str):
        return "~strategy"
    return None


if TYPE_CHECKING:
    HookEntry = Union[str, HookRef]
else:
    HookEntry = tagged_union({"~strategy": str, "~ref": HookRef}, _strategy_or_ref, error="hook_entry",
                             message=HOOK_ENTRY_HINT)


class PoolConfig(Strict):
    """A pool: a named, weighted group of lanes with shared failover, breaker and affinity config."""

    members: list[MemberConfig]
    """The lanes (required, at least one)."""
    hooks: list[HookEntry] = Field(default_factory=list)
    """Ordered hooks: at most one bare strategy name (weighted | cheapest | fastest | least_busy |
    usage; default weighted) plus inline { module: ... } refs."""
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    """Per-(pool, lane) breaker tuning."""
    failover: FailoverConfig = Field(default_factory=FailoverConfig)
    """Failover bounds."""
    on_exhausted: OnExhausted = "reject"
    """When every member is tripped/dead/full: reject (503 + Retry-After; aliases status_503,
    status503, 503), least_bad (aliases least-bad, leastbad) or { fallback_pool: <pool> }."""
    affinity: AffinityConfig | None = None
    """Session affinity; absent = none."""
    translation: Literal["lossy", "strict"] = "lossy"
    """Cross-protocol hops: lossy (default) drops or down-maps fields the target cannot carry and names
    them in x-busbar-translation-dropped; strict refuses such a request with a 400 naming the fields."""

    @field_validator("on_exhausted", mode="before")
    @classmethod
    def _normalize_on_exhausted(cls, v: Any) -> Any:
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            key = str(v).strip().lower()
            if key in _ON_EXHAUSTED_ALIASES:
                return _ON_EXHAUSTED_ALIASES[key]
            raise ValueError(f"'{v}' is not a known keyword; {ON_EXHAUSTED_HINT}")
        return v
