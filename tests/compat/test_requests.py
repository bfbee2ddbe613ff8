"""cloudcoil_sync._compat.requests against the installed requests."""

from __future__ import annotations

import pytest
import requests
from requests import PreparedRequest
from requests.cookies import RequestsCookieJar

from cloudcoil_sync._compat import DependencyChanged
from cloudcoil_sync._compat.requests import check, set_cookie_jar


def test_the_jar_is_where_prepare_cookies_keeps_it() -> None:
    check()
    prepared, jar = PreparedRequest(), RequestsCookieJar()
    prepared.prepare(method="GET", url="https://127.0.0.1/")
    set_cookie_jar(prepared, jar)
    assert "Cookie" not in prepared.headers
    copied = prepared.copy()  # what Session.resolve_redirects does with it
    assert isinstance(vars(copied)["_cookies"], RequestsCookieJar)


def test_a_version_keeping_the_jar_elsewhere_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def elsewhere(self: PreparedRequest, cookies: object) -> None:
        self.__dict__["jar"] = cookies

    monkeypatch.setattr(PreparedRequest, "prepare_cookies", elsewhere)
    with pytest.raises(DependencyChanged) as changed:
        check()
    assert str(changed.value).startswith(
        f"requests {requests.__version__} no longer offers PreparedRequest._cookies, which "
        "cloudcoil_sync uses to give a directly prepared request"
    )
