"""`Sharding` settings and its place in an `Application`: clear errors for bad input."""

from __future__ import annotations

import pytest

from cloudcoil_sync.application import Application
from cloudcoil_sync.sharding import Sharding


def test_sharding_and_leader_election_are_mutually_exclusive() -> None:
    with pytest.raises(ValueError, match="leader_election and sharding are mutually exclusive"):
        Application("ops", leader_election=True, sharding=Sharding(identity="a"))


def test_the_ring_defaults_to_the_application_name() -> None:
    sharding = Sharding(identity="pod-1")
    app = Application("ops", namespace="team", sharding=sharding)
    assert app.sharding is sharding
    assert (sharding.ring_name, sharding.namespace) == ("ops", "team")
    assert sharding.shard_lease == "ops-shard-pod-1"
    assert sharding.selector == "shard.sharding.cloudcoil.dev/ops=pod-1"


def test_identity_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUDCOIL_SHARD_IDENTITY", "widgets-7f9c-x2")
    assert Sharding().identity == "widgets-7f9c-x2"


@pytest.mark.parametrize("identity", ["-a", "a b", "x" * 64, "a/b"])
def test_an_identity_that_cannot_be_a_label_value_is_refused(identity: str) -> None:
    with pytest.raises(ValueError, match="must be a label value"):
        Sharding(identity=identity)


def test_durations_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        Sharding(identity="a", lease_duration=5, renew_deadline=6)


def test_sharding_must_be_a_sharding() -> None:
    with pytest.raises(TypeError, match="sharding must be a Sharding or None"):
        Application("ops", sharding=True)  # type: ignore[arg-type]
