import copy
import dataclasses
import math
import pickle
import sys
from collections import namedtuple
from types import FrameType
from typing import Any

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


def test_equal_keys_built_apart_are_one_dict_key() -> None:
    keys = {ResourceKey("a", "ns"): 1, ResourceKey("a"): 2, ResourceKey("b", "ns"): 3}
    assert keys[ResourceKey(name="a", namespace="ns")] == 1
    assert keys[ResourceKey(namespace="ns", name="a")] == 1
    assert keys[ResourceKey.from_resource({"metadata": {"name": "a"}})] == 2
    assert hash(ResourceKey("a", "ns")) == hash(ResourceKey("a", namespace="ns"))
    assert ResourceKey("a", "ns") != ResourceKey("a")
    assert (ResourceKey("a", "ns") != ResourceKey("a", "ns")) is False
    assert {ResourceKey("a", "ns"), ResourceKey("a", "ns"), ResourceKey("a")} == {
        ResourceKey("a"),
        ResourceKey("a", "ns"),
    }


def test_a_key_equals_no_other_type() -> None:
    key = ResourceKey("a", "ns")
    pair = namedtuple("pair", "name namespace")
    others: list[object] = ["ns/a", "a", ("a", "ns"), ("a", "ns", None), pair("a", "ns"), None]
    for other in others:
        assert key != other and other != key
        assert other not in {key}
    cluster: set[object] = {ResourceKey("a")}
    assert ("a", None) not in cluster and ("a",) not in cluster


def test_hashing_and_comparing_keys_runs_no_python_code() -> None:
    # The work queue, store and echoes hash a key ~30 times per reconciled object.
    stored = {ResourceKey(f"w{i}", "ns"): i for i in range(5)}
    probes = [ResourceKey(f"w{i}", "ns") for i in range(5)]
    calls: list[str] = []

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        found = [stored[key] for key in probes]
        same = probes[0] == ResourceKey("w0", "ns") and probes[0] != probes[1]
        hashes = {hash(key) for key in probes}
    finally:
        sys.setprofile(None)
    assert (found, same, len(hashes)) == ([0, 1, 2, 3, 4], True, 5)
    assert [c for c in calls if c not in ("<listcomp>", "<setcomp>")] == ["__new__"]


def test_key_repr_str_and_fields_read_as_before() -> None:
    key = ResourceKey("w", "default")
    assert repr(key) == "ResourceKey(name='w', namespace='default')"
    assert repr(ResourceKey("n")) == "ResourceKey(name='n', namespace=None)"
    assert (str(key), f"{key}", format(key)) == ("default/w",) * 3
    assert (key.name, key.namespace, ResourceKey("n").namespace) == ("w", "default", None)
    with pytest.raises(ValueError, match="A resource key needs a name"):
        ResourceKey(name="", namespace="ns")
    with pytest.raises(ValueError, match="A resource key needs a name"):
        ResourceKey(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ResourceKey()  # type: ignore[call-arg]


def test_a_key_is_immutable() -> None:
    key = ResourceKey("a", "ns")
    for attribute in ("name", "namespace", "other"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(key, attribute, "b")
        with pytest.raises(AttributeError):
            delattr(key, attribute)
    assert (key.name, key.namespace) == ("a", "ns")


@pytest.mark.parametrize(
    "clone",
    [
        pickle.loads(pickle.dumps(ResourceKey("a", "ns"))),
        pickle.loads(pickle.dumps(ResourceKey("a", "ns"), protocol=0)),
        copy.copy(ResourceKey("a", "ns")),
        copy.deepcopy(ResourceKey("a", "ns")),
        copy.deepcopy({"k": [ResourceKey("a", "ns")]})["k"][0],
    ],
)
def test_a_key_pickles_and_copies(clone: ResourceKey) -> None:
    assert type(clone) is ResourceKey
    assert clone == ResourceKey("a", "ns") and hash(clone) == hash(ResourceKey("a", "ns"))
    assert repr(clone) == "ResourceKey(name='a', namespace='ns')"


def test_dataclass_functions_still_apply_to_a_key() -> None:
    key = ResourceKey("a", "ns")
    assert dataclasses.is_dataclass(key)
    assert [f.name for f in dataclasses.fields(key)] == ["name", "namespace"]
    assert dataclasses.replace(key, namespace=None) == ResourceKey("a")
    assert dataclasses.asdict(key) == {"name": "a", "namespace": "ns"}
    assert dataclasses.astuple(key) == ("a", "ns")
    with pytest.raises(ValueError, match="needs a name"):
        dataclasses.replace(key, name="")

    @dataclasses.dataclass
    class Holder:
        key: ResourceKey

    assert dataclasses.asdict(Holder(key)) == {"key": {"name": "a", "namespace": "ns"}}


def test_a_key_matches_patterns_by_field() -> None:
    match ResourceKey("a", "ns"):
        case ResourceKey(name, None):
            raise AssertionError(name)
        case ResourceKey("a", namespace=namespace):
            assert namespace == "ns"
        case _:
            raise AssertionError("no case matched")


def test_a_key_is_neither_ordered_nor_iterable() -> None:
    key = ResourceKey("a", "ns")
    with pytest.raises(TypeError, match="'<' not supported"):
        sorted([key, ResourceKey("b", "ns")])
    with pytest.raises(TypeError):
        assert key >= key
    with pytest.raises(TypeError, match="not iterable"):
        list(key)
    with pytest.raises(TypeError, match="iterable"):
        _name, _namespace = key  # type: ignore[misc]
    with pytest.raises(TypeError, match="not iterable"):
        assert "a" in key
    assert bool(key)


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
