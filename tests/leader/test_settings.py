"""LeaderElection construction: 0.8's defaults, validation and messages."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from cloudcoil_sync.controller._internal.leader import LeaderElection

RANGE = "Require 0 < retry_period < renew_deadline < lease_duration"
DNS_NAMES = "Lease name and namespace must be valid Kubernetes DNS names"


def test_defaults_follow_client_go() -> None:
    election = LeaderElection("widgets")
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (15, 10, 2)
    assert election.namespace is None and election.config is None
    hostname, _, suffix = election.identity.rpartition("_")
    assert hostname == socket.gethostname() and len(suffix) == 36
    assert LeaderElection("widgets").identity != election.identity
    assert election.http_timeout == 5.0
    assert election.lease_duration_seconds == 15
    assert not election.is_leader and election.deadline is None


def test_short_float_durations_for_tests_round_up_in_the_record() -> None:
    election = LeaderElection("a", lease_duration=1.5, renew_deadline=0.6, retry_period=0.1)
    assert election.lease_duration_seconds == 2
    assert election.http_timeout == 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"renew_deadline": 15}, RANGE),
        ({"retry_period": 10}, RANGE),
        ({"retry_period": 0}, RANGE),
        ({"renew_deadline": float("nan")}, RANGE),
        ({"retry_period": "2"}, RANGE),
        ({"lease_duration": 0}, "lease_duration must be a positive int32 number of seconds"),
        ({"lease_duration": True}, "lease_duration must be a positive int32 number of seconds"),
        ({"lease_duration": 2**31}, "lease_duration must be a positive int32 number of seconds"),
        ({"identity": ""}, "Lease identity must have 1-128 characters"),
        ({"identity": "x" * 129}, "Lease identity must have 1-128 characters"),
        ({"namespace": "Bad"}, f"{DNS_NAMES}, got 'Bad'"),
        ({"namespace": "a.b"}, f"{DNS_NAMES}, got 'a.b'"),
    ],
)
def test_invalid_settings(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        LeaderElection("widgets", **options)
    assert str(error.value) == message


@pytest.mark.parametrize("name", ["", "-a", "A", "a_b", "a" * 254, "a." + "b" * 64])
def test_invalid_names(name: str) -> None:
    with pytest.raises(ValueError, match="valid Kubernetes DNS names"):
        LeaderElection(name)


def test_dotted_names_and_explicit_identity_are_accepted() -> None:
    election = LeaderElection("widgets.example.com", namespace="ops", identity="pod-1")
    assert (election.name, election.namespace, election.identity) == (
        "widgets.example.com",
        "ops",
        "pod-1",
    )


def test_start_without_config_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs a Config"):
        LeaderElection("widgets").start()
