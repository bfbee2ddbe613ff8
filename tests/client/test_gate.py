"""The write gate: the client's one hook before a write. Any object with `write(method, path)`
is a gate; the client asks it for writes only and knows nothing else of it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config, WriteFenced, fenced
from cloudcoil_sync.client._internal.gate import WriteGate, current
from cloudcoil_sync.testing import Emulator


class Turnstile:
    """A gate of the test's own: counts writes on the wire, refuses DELETEs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.open_writes = 0

    @contextmanager
    def write(self, method: str, path: str) -> Iterator[None]:
        if method == "DELETE":
            raise WriteFenced(f"{method} {path}: no deletes here", "closed-for-deletes")
        self.seen.append((method, path))
        self.open_writes += 1
        try:
            yield
        finally:
            self.open_writes -= 1


def test_the_transport_sends_writes_through_the_installed_gate_and_only_writes(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    api = kube_config.client(ConfigMap).raw
    gate = Turnstile()
    checked: WriteGate = gate  # the protocol the transport asks of a gate
    with fenced(checked):
        assert current() is gate
        api.create({"metadata": {"name": "gated"}})
        assert api.get("gated")["metadata"]["name"] == "gated"  # reads are not gated
        api.merge_patch("gated", {"data": {"a": "b"}})
        with pytest.raises(WriteFenced, match="no deletes here") as refused:
            api.delete("gated")
    assert refused.value.cause == "closed-for-deletes"
    assert current() is None
    assert [method for method, _ in gate.seen] == ["POST", "PATCH"]
    assert all("/configmaps" in path for _, path in gate.seen)
    assert gate.open_writes == 0  # each admitted write was let go once answered
    stored = kube_emulator.list_objects("", "configmaps", "default")
    assert [o["data"] for o in stored if o["metadata"]["name"] == "gated"] == [{"a": "b"}]


def test_gates_nest_per_thread_and_none_ungates() -> None:
    outer, inner = Turnstile(), Turnstile()
    with fenced(outer):
        with fenced(inner):
            assert current() is inner
            with fenced(None):
                assert current() is None
            assert current() is inner
        assert current() is outer
    assert current() is None
