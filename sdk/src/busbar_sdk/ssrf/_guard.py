"""One egress purpose's SSRF checks bound together (:class:`HostGuard`), and :func:`redact_url`.

What lives here: the per-purpose binding of :class:`~busbar_sdk.ssrf.SsrfPolicy` that every guarded
client holds (its purpose, its own allow-list, its address-class rules) and the URL redaction used in
refusals and status output. No I/O: resolving a host is the client's job; it then hands the answer to
:meth:`HostGuard.check_addresses` and connects only to what that returns.
"""
from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from busbar_sdk.ssrf._hosts import IPAddress
from busbar_sdk.ssrf._policy import SsrfPolicy

__all__ = ["HostGuard", "redact_url"]


class HostGuard:
    """One egress purpose's two SSRF checks, with the per-URL verdict cached.

    Args:
        policy: the :class:`SsrfPolicy` (deny/allow lists of the deployment).
        purpose: who is asking, the first words of every refusal (``"provider openai"``,
            ``"settings.url"``).
        provider_allow: this purpose's own allow-list (hosts, IPs or CIDRs): a provider's
            ``allow_metadata_hosts``, a forwarder's ``settings.allow_hosts``. It applies to this
            guard only, never to another purpose's.
        allow_private: True for provider upstreams (private/loopback literals allowed), False for
            hook sidecars, webhooks and OTLP (loopback only).
        require_https_public, require_https: as :meth:`SsrfPolicy.check_url`.

    ``check_url(url)`` is the config-time verdict; ``check_url_parts(scheme, host, port)`` the
    request-time one, run once per distinct (scheme, host, port) and cached when it passes;
    ``check_addresses(host, addresses)`` the connect-time one (every resolved address must pass;
    returns the addresses to connect to). All raise :class:`~busbar_sdk.ssrf.SsrfBlocked`.
    """

    __slots__ = ("policy", "purpose", "provider_allow", "_allow_private", "_require_https_public",
                 "_require_https", "_ok")
    _CACHE_MAX = 1024

    def __init__(self, policy: SsrfPolicy, *, purpose: str, provider_allow: Sequence[str] = (),
                 allow_private: bool, require_https_public: bool = True, require_https: bool = False):
        self.policy = policy
        self.purpose = purpose
        self.provider_allow = tuple(provider_allow)
        self._allow_private = allow_private
        self._require_https_public = require_https_public
        self._require_https = require_https
        self._ok: dict[tuple[str, str, int | None], None] = {}

    def check_url(self, url: str) -> None:
        """The config-time verdict on one URL (:meth:`SsrfPolicy.check_url` for this purpose)."""
        self.policy.check_url(url, purpose=self.purpose, provider_allow=self.provider_allow,
                              allow_private=self._allow_private, require_https_public=self._require_https_public,
                              require_https=self._require_https)

    def check_url_parts(self, scheme: str, host: str, port: int | None) -> None:
        """The request-time verdict on a split URL (cached when it passes)."""
        key = (scheme, host, port)
        if key in self._ok:
            return
        self.policy.check_host(scheme, host, purpose=self.purpose, provider_allow=self.provider_allow,
                               allow_private=self._allow_private,
                               require_https_public=self._require_https_public,
                               require_https=self._require_https)
        if len(self._ok) >= self._CACHE_MAX:
            self._ok.clear()
        self._ok[key] = None

    def check_addresses(self, host: str, addresses: Sequence[str | IPAddress]) -> list[IPAddress]:
        """The connect-time verdict: every resolved address must pass (see ``check_resolved``)."""
        return self.policy.check_resolved(host, addresses, purpose=self.purpose,
                                          provider_allow=self.provider_allow,
                                          allow_private=self._allow_private)


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@`` (for errors, logs and status);
    ``<invalid URL>`` when it cannot be split."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
