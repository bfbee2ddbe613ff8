"""The installed waitress still offers what the webhook server uses of its internals.

`cloudcoil_sync.admission._internal.channel` is the only module using waitress beyond its public API
(`create_server`, which the HealthServer uses); it lists what it uses in
WAITRESS_INTERNALS. A waitress upgrade that drops or renames any of it fails here, naming
what is missing, rather than as a broken connection at run time.
"""

from __future__ import annotations

import importlib
from typing import Any

from waitress.adjustments import Adjustments
from waitress.parser import HTTPRequestParser

from cloudcoil_sync.admission._internal.channel import WAITRESS_INTERNALS


def _resolve(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name, None)


def _offers(dotted: str, target: Any, attribute: str) -> bool:
    if target is Adjustments:  # keyword arguments it accepts
        return attribute in {name for name, _ in Adjustments._params}
    if target is HTTPRequestParser:  # attributes of a parsed request
        parser = HTTPRequestParser(Adjustments())
        parser.received(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        return hasattr(parser, attribute)
    return hasattr(target, attribute)


def test_waitress_offers_what_the_webhook_server_uses() -> None:
    missing = []
    for dotted, attributes in WAITRESS_INTERNALS.items():
        target = _resolve(dotted)
        if target is None:
            missing.append(dotted)
            continue
        missing += [f"{dotted}.{a}" for a in attributes if not _offers(dotted, target, a)]
    assert not missing, (
        "The installed waitress no longer offers what cloudcoil_sync.admission._internal.channel "
        f"uses: {', '.join(missing)}"
    )


def test_only_the_channel_module_reaches_into_waitress() -> None:
    import pathlib

    import cloudcoil_sync

    root = pathlib.Path(cloudcoil_sync.__file__).parent
    users = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "from waitress." in path.read_text() or "import waitress." in path.read_text()
    )
    assert users == ["admission/_internal/channel.py"]
