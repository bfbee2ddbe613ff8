import math

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.controller import ResourceKey, Result, TerminalError, Wait


def test_resource_key_from_model_and_dict() -> None:
    cm = ConfigMap.model_validate({"metadata": {"name": "a", "namespace": "ns"}})
    assert ResourceKey.from_resource(cm) == ResourceKey("a", "ns")
    assert ResourceKey.from_resource({"metadata": {"name": "a", "namespace": "ns"}}) == (
        ResourceKey("a", "ns")
    )
    ns = Namespace.model_validate({"metadata": {"name": "cluster-wide"}})
    assert ResourceKey.from_resource(ns) == ResourceKey("cluster-wide")
    assert ResourceKey.from_resource({"metadata": {"name": "x", "namespace": ""}}).namespace is None


def test_resource_key_is_hashable_frozen_and_named() -> None:
    key = ResourceKey("a", "ns")
    assert {key: 1}[ResourceKey("a", "ns")] == 1
    assert str(key) == "ns/a"
    assert str(ResourceKey("c")) == "c"
    with pytest.raises(AttributeError):
        key.name = "b"  # type: ignore[misc]
    with pytest.raises(ValueError, match="needs a name"):
        ResourceKey("")
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ResourceKey.from_resource({"metadata": {}})
    with pytest.raises(ValueError, match=r"metadata\.name"):
        ResourceKey.from_resource(ConfigMap())


@pytest.mark.parametrize("delay", [-1, math.nan, math.inf, True, "3"])
def test_result_rejects_bad_delays(delay: float) -> None:
    with pytest.raises(ValueError, match="requeue_after must be finite and nonnegative"):
        Result(requeue_after=delay)


def test_result_accepts_zero_and_resource() -> None:
    cm = ConfigMap()
    assert Result(requeue_after=0).requeue_after == 0
    assert Result(resource=cm).resource is cm
    assert Result().requeue_after is None


def test_wait_defaults_and_spellings() -> None:
    wait = Wait("RollingOut")
    assert (wait.reason, wait.message, wait.requeue_after) == ("RollingOut", "", 30.0)
    assert str(wait) == "RollingOut"
    assert Wait("R", "still going", after=7).requeue_after == 7
    assert str(Wait("R", "still going")) == "still going"
    assert Wait("R", requeue_after=2.5).requeue_after == 2.5


@pytest.mark.parametrize("delay", [0, -1, math.nan, math.inf, -math.inf, "3", True])
def test_wait_rejects_bad_delays(delay: float) -> None:
    with pytest.raises(ValueError, match="Wait delay must be finite and positive"):
        Wait("R", after=delay)


def test_wait_rejects_missing_reason_and_both_spellings() -> None:
    with pytest.raises(ValueError, match="Wait needs a reason"):
        Wait("")
    with pytest.raises(ValueError, match="Use after or requeue_after, not both"):
        Wait("R", after=1, requeue_after=1)


def test_terminal_error_is_an_exception() -> None:
    assert isinstance(TerminalError("x"), Exception)
    assert not issubclass(TerminalError, Wait)
