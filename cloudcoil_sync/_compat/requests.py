"""requests internals: the cookie jar of a PreparedRequest built without `prepare`."""

from __future__ import annotations

from requests import PreparedRequest
from requests.cookies import RequestsCookieJar

from cloudcoil_sync._compat import changed

__all__ = ["check", "set_cookie_jar"]


def set_cookie_jar(prepared: PreparedRequest, jar: RequestsCookieJar) -> None:
    """Store `jar` where ``prepare_cookies(jar)`` would, without building a Cookie header from
    it (the client's jar is always empty). `Session.resolve_redirects` copies and reads it."""
    prepared._cookies = jar  # type: ignore[attr-defined]


def check() -> None:
    """Raise `DependencyChanged` unless `PreparedRequest._cookies` is still where requests keeps
    the jar that ``prepare_cookies`` was given."""
    probe, jar = PreparedRequest(), RequestsCookieJar()
    probe.prepare(method="GET", url="https://127.0.0.1/", cookies=jar)
    if vars(probe).get("_cookies") is not jar:
        raise changed(
            "requests",
            "PreparedRequest._cookies",
            "to give a directly prepared request its (empty) cookie jar (Transport.request)",
        )
