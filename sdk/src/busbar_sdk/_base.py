"""Plugin base classes that turn ``busbar_call`` into typed methods, and :func:`export_plugin`.

Subclass the base for your kind, override the methods you need, and export it::

    from busbar_sdk import HookPlugin, Order, export_plugin
    from busbar_sdk.models import DecideMessage

    class Reverse(HookPlugin):
        def decide(self, message: DecideMessage) -> Order:
            return Order(order=[c.idx for c in reversed(message.candidates)])

    plugin = export_plugin(Reverse)     # entry point: reverse = "my_package:plugin"

``export_plugin`` returns an object whose methods are the six ``@hookimpl`` ABI hooks:
``busbar_open(settings)`` constructs your class with the settings (that instance is the handle),
``busbar_call(handle, payload)`` calls ``handle.handle(payload)``, which parses the message into
its model, calls the typed method and serializes the reply arm back to a dict.

:class:`DictHookPlugin` is the dict-level twin of :class:`HookPlugin` for hooks on the request
path that count microseconds (the first-party routers): its methods take the wire dicts as they
arrive and return wire dicts (``None`` = ``{}``, abstain), no model is parsed or serialized, and
``inline = True`` on the class declares ``busbar_call.busbar_inline`` (CPU-only and bounded: the
kernel calls it on the request's own thread). Export it with the same :func:`export_plugin`::

    class Pin(DictHookPlugin):
        inline = True

        def decide(self, payload: dict) -> dict:
            return {"order": [c["idx"] for c in payload["candidates"][:1]]}

    plugin = export_plugin(Pin)

Source: docs/plugins.md#the-abi.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from busbar_sdk._errors import PayloadError
from busbar_sdk._models_hook import DecideMessage, NotifyMessage, TransformMessage
from busbar_sdk._models_kinds import (
    AuthenticateMessage,
    AuthPass,
    AuthReject,
    Identity,
    ResolveMessage,
    SecretFailure,
    SecretValue,
    StoreFailure,
    StoreMessage,
    StoreResult,
)
from busbar_sdk._models_mgmt import (
    ConfigureAck,
    ConfigureMessage,
    DescribeMessage,
    DescribeReply,
    StatusMessage,
    StatusReply,
)
from busbar_sdk._versions import TRANSPORT_VERSION
from busbar_sdk.hookspec import hookimpl

__all__ = ["AuthPlugin", "DictHookPlugin", "HookPlugin", "Plugin", "PluginExport", "SecretPlugin", "StorePlugin",
           "export_plugin"]


def _wire(reply: object) -> dict[str, Any]:
    if reply is None:
        return {}
    if isinstance(reply, BaseModel):
        to_wire = getattr(reply, "to_wire", None)
        if to_wire is None:
            raise PayloadError(f"{type(reply).__name__} is not a reply arm")
        result: dict[str, Any] = to_wire()
        return result
    if isinstance(reply, dict):
        return reply
    raise PayloadError(f"a handler returned {type(reply).__name__}; return a reply model, a dict or None")


def _parse(model: type[BaseModel], payload: dict[str, Any]) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PayloadError(f"{model.__name__}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


class Plugin:
    """Base of every plugin class: one instance per ``busbar_open``, holding its settings.

    Attributes:
        kind: ``hook`` | ``store`` | ``secret`` | ``auth`` (set by the subclasses below).
        inline: class-level; ``True`` declares ``busbar_call.busbar_inline`` on the export (a hook
            whose calls are CPU-only and bounded; see :func:`busbar_sdk.hookspec.busbar_inline`).
        settings: the instance's operator settings (a copy).
    """

    kind: ClassVar[str] = ""
    inline: ClassVar[bool] = False

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings: dict[str, Any] = dict(settings)

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Answer one ``busbar_call`` payload; the subclasses route it to typed methods."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (``busbar_close``). Default: nothing."""


class _Hook(Plugin):
    """What both hook bases share: ``kind = "hook"``, the class-level :attr:`settings_schema`
    (``None``: no schema) and :attr:`settings_version`, the last ``configure`` version acknowledged
    (``None`` before any). Override :meth:`bind_state` to receive the fleet-wide shared state."""

    kind: ClassVar[str] = "hook"
    settings_schema: ClassVar[dict[str, Any] | None] = None

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        self.settings_version: int | None = None

    def bind_state(self, state: Any) -> None:
        """Receive the instance's :class:`busbar_sdk.shared_state.SharedState` (the optional ABI hook
        ``busbar_bind_state``; the export declares it only when a subclass overrides this method, so
        the kernel binds nothing for a plugin that does not use it). Must not block."""


class HookPlugin(_Hook):
    """A hook (gate or tap). Override any of :meth:`decide`, :meth:`transform`, :meth:`notify`;
    management ops have working defaults. Return ``None`` to abstain.

    Attributes:
        settings_schema: class-level JSON Schema of your settings; :meth:`describe` serves it.
        settings_version: the last ``configure`` version acknowledged (``None`` before any).
    """

    def decide(self, message: DecideMessage) -> Any:
        """A gate's decision: return a reply arm (``Reject``/``Restrict``/``Order``/``Rewrite``)
        or ``None`` to abstain. Default: abstain."""
        return None

    def transform(self, message: TransformMessage) -> Any:
        """A rewrite pass (``prompt: rw``): ``Rewrite``, ``Reject`` or ``None``. Default: abstain."""
        return None

    def notify(self, message: NotifyMessage) -> None:
        """A tap observation; the return value is ignored. Default: nothing."""

    def configure(self, message: ConfigureMessage) -> ConfigureAck:
        """Adopt pushed settings and ack the exact version. Default: store both, ack."""
        self.settings = dict(message.configure.settings)
        self.settings_version = message.configure.settings_version
        return ConfigureAck(settings_version=message.configure.settings_version)

    def describe(self) -> DescribeReply | None:
        """Self-description: default serves :attr:`settings_schema` (or ``{}`` when unset)."""
        return DescribeReply(json_schema=self.settings_schema) if self.settings_schema is not None else None

    def status(self) -> StatusReply | None:
        """Observed state; default reports settings and version with no metrics (``{}`` before a
        configure). Override to add metrics."""
        if self.settings_version is None:
            return None
        return StatusReply(settings_version=self.settings_version, settings=self.settings)

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        op = payload.get("op")
        if op == "decide":
            return _wire(self.decide(_parse(DecideMessage, payload)))
        if op == "transform":
            return _wire(self.transform(_parse(TransformMessage, payload)))
        if op == "notify":
            self.notify(_parse(NotifyMessage, payload))
            return {}
        if op is None or op == "configure" or op == "describe" or op == "status":
            if "configure" in payload:
                return _wire(self.configure(_parse(ConfigureMessage, payload)))
            if "describe" in payload:
                _parse(DescribeMessage, payload)
                return _wire(self.describe())
            if "status" in payload:
                _parse(StatusMessage, payload)
                return _wire(self.status())
        return {}  # unknown op or management key: not for me


class DictHookPlugin(_Hook):
    """A hook at the dict level: every method takes the wire message as a ``dict`` (the kernel's
    own, no copy, no validation: read it, do not keep it) and returns the wire reply as a ``dict``
    (``None`` is ``{}``, abstain). Unknown ops and management keys answer ``{}``.

    Attributes:
        settings_schema: class-level JSON Schema of your settings; :meth:`describe` serves it.
        settings_version: the last ``configure`` version acknowledged (``None`` before any).
    """

    def decide(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """A gate's decision (``op: decide``): a reply arm dict, or ``None``/``{}`` to abstain."""
        return None

    def transform(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """A rewrite pass (``op: transform``, ``prompt: rw``): ``{"rewrite": ...}``, ``{"reject": ...}``
        or ``None``."""
        return None

    def notify(self, payload: dict[str, Any]) -> None:
        """A tap observation (``op: notify``); the return value is ignored."""

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        """The ``configure`` object (``{"hook", "settings", "settings_version", "busbar_version"}``):
        adopt the settings, reply ``{"ack": {"settings_version": <the exact version>}}`` (or
        ``{"error": "..."}`` to refuse them). Default: store both, ack."""
        version = body.get("settings_version")
        settings = body.get("settings")
        self.settings = dict(settings) if isinstance(settings, dict) else {}
        self.settings_version = version if type(version) is int else None
        return {"ack": {"settings_version": version}}

    def describe(self) -> dict[str, Any]:
        """``{"schema": <settings JSON Schema>}``, or ``{}`` without :attr:`settings_schema`."""
        return {"schema": self.settings_schema} if self.settings_schema is not None else {}

    def status(self) -> dict[str, Any]:
        """``{"status": {"settings_version", "settings", "metrics"}}``; ``{}`` before a configure.
        Override to add metrics."""
        if self.settings_version is None:
            return {}
        return {"status": {"settings_version": self.settings_version, "settings": self.settings, "metrics": []}}

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        op = payload.get("op")
        if op == "decide":
            return self.decide(payload) or {}
        if op == "transform":
            return self.transform(payload) or {}
        if op == "notify":
            self.notify(payload)
            return {}
        if op is None:
            if "configure" in payload:
                body = payload["configure"]
                return self.configure(body if isinstance(body, dict) else {})
            if "describe" in payload:
                return self.describe()
            if "status" in payload:
                return self.status()
        return {}  # unknown op or management key: not for me


class SecretPlugin(Plugin):
    """A secret backend: implement :meth:`resolve`."""

    kind: ClassVar[str] = "secret"

    def resolve(self, settings: dict[str, Any], deadline_ms: int) -> str | bytes | SecretFailure:
        """Return the secret for one reference's ``settings`` within ``deadline_ms`` milliseconds."""
        raise NotImplementedError

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("op") != "resolve":
            return {}
        msg: ResolveMessage = _parse(ResolveMessage, payload)
        value = self.resolve(msg.settings, msg.deadline_ms)
        if isinstance(value, SecretFailure):
            return value.to_wire()
        return SecretValue(value=value).to_wire()


class AuthPlugin(Plugin):
    """An identity provider in ``auth.chain``: set :attr:`module_name`, implement :meth:`authenticate`."""

    kind: ClassVar[str] = "auth"
    module_name: ClassVar[str] = ""

    def authenticate(self, credential: str) -> Identity | AuthReject | AuthPass | None:
        """Verify a bearer credential: ``Identity``, ``AuthReject``, or ``AuthPass``/``None`` (not mine)."""
        raise NotImplementedError

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        op = payload.get("op")
        if op == "name":
            return {"name": self.module_name}
        if op == "authenticate":
            msg: AuthenticateMessage = _parse(AuthenticateMessage, payload)
            return _wire(self.authenticate(msg.credential) or AuthPass())
        return {}


class StorePlugin(Plugin):
    """A durable store: each public method you define is an operation, called with ``args`` as
    keyword arguments; its JSON-compatible return value becomes ``{"result": ...}``."""

    kind: ClassVar[str] = "store"
    _RESERVED: ClassVar[frozenset[str]] = frozenset({"handle", "close", "operations", "kind", "settings"})

    @classmethod
    def operations(cls) -> frozenset[str]:
        """The operation names this class serves (computed once per class)."""
        return _store_operations(cls)

    def handle(self, payload: dict[str, Any]) -> dict[str, Any]:
        msg: StoreMessage = _parse(StoreMessage, payload)
        if msg.op not in self.operations():
            return StoreFailure(kind="unsupported", message=f"unknown store operation {msg.op!r}").to_wire()
        method: Callable[..., Any] = getattr(self, msg.op)
        return StoreResult(result=method(**msg.args)).to_wire()


_STORE_OPERATIONS: dict[type[StorePlugin], frozenset[str]] = {}


def _store_operations(cls: type[StorePlugin]) -> frozenset[str]:
    ops = _STORE_OPERATIONS.get(cls)
    if ops is None:
        ops = frozenset(n for n, _ in inspect.getmembers(cls, inspect.isfunction)
                        if not n.startswith("_") and n not in cls._RESERVED)
        _STORE_OPERATIONS[cls] = ops
    return ops


class PluginExport:
    """The ABI implementation for a :class:`Plugin` subclass (what :func:`export_plugin` returns).

    ``busbar_call`` is a function of this export (not a method), so the class's ``inline``
    declaration lands on it alone (``busbar_call.busbar_inline``)."""

    def __init__(self, cls: type[Plugin]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Plugin) and cls.kind):
            raise TypeError("export_plugin() takes a subclass of HookPlugin, DictHookPlugin, StorePlugin, "
                            "SecretPlugin or AuthPlugin")
        self.plugin_class = cls
        if getattr(type(self), "busbar_call", None) is not None:
            return      # a subclass's own ``busbar_call`` (with an async twin, say) is the ABI's: not shadowed

        if issubclass(cls, DictHookPlugin):
            def busbar_call(handle: Any, payload: dict[str, Any]) -> dict[str, Any]:
                if payload.get("op") == "decide":         # the request path: one call, no dispatch
                    reply: dict[str, Any] | None = handle.decide(payload)
                    return reply or {}
                result: dict[str, Any] = handle.handle(payload)
                return result
        else:
            def busbar_call(handle: Any, payload: dict[str, Any]) -> dict[str, Any]:
                result: dict[str, Any] = handle.handle(payload)
                return result

        if cls.inline is True:
            busbar_call.busbar_inline = True  # type: ignore[attr-defined]  # the ABI's capability attribute
        self.busbar_call = hookimpl(busbar_call)
        if issubclass(cls, _Hook) and cls.bind_state is not _Hook.bind_state:
            def busbar_bind_state(handle: Any, state: Any) -> None:
                handle.bind_state(state)
            # optionalhook: a kernel older than the hook loads the plugin and never calls it
            self.busbar_bind_state = hookimpl(optionalhook=True)(busbar_bind_state)

    @hookimpl
    def busbar_abi(self) -> int:
        return TRANSPORT_VERSION

    @hookimpl
    def busbar_plugin_kind(self) -> str:
        return self.plugin_class.kind

    @hookimpl
    def busbar_open(self, settings: dict[str, Any]) -> object:
        return self.plugin_class(settings)

    @hookimpl
    def busbar_free(self, handle: Plugin, obj: object) -> None:
        return None

    @hookimpl
    def busbar_close(self, handle: Plugin) -> None:
        handle.close()

    def __repr__(self) -> str:
        return f"export_plugin({self.plugin_class.__qualname__})"


def export_plugin(cls: type[Plugin]) -> PluginExport:
    """Wrap a plugin class as the object a ``busbar.plugins`` entry point names.

    Raises:
        TypeError: ``cls`` is not a subclass of one of the four bases.
    """
    return PluginExport(cls)
