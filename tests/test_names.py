"""cloudcoil_sync._internal.names: the one home of the DNS-1123/1035 rules every layer applies."""

from __future__ import annotations

import pytest

from cloudcoil_sync._internal.names import (
    dns_label,
    is_dns1035_label,
    is_dns_label,
    is_dns_subdomain,
)

LABEL_63 = "a" * 63
SUBDOMAIN_253 = ".".join([LABEL_63] * 3 + ["b" * 61])  # 3 * 64 + 61 = 253 characters


@pytest.mark.parametrize("value", ["a", "0", "my-operator", "1-a", LABEL_63])
def test_labels(value: str) -> None:
    assert is_dns_label(value)


@pytest.mark.parametrize(
    "value", ["", "A", "-a", "a-", "a.b", "a_b", "a" * 64, "abc\n", "é", None, 5, b"abc"]
)
def test_not_labels(value: object) -> None:
    assert not is_dns_label(value)


def test_dns1035_labels_start_with_a_letter() -> None:
    assert is_dns1035_label("v1") and is_dns1035_label("widgets") and is_dns1035_label(LABEL_63)
    for value in ("1v", "", "a" * 64, "a-", "V1", "a.b", "abc\n", None):
        assert not is_dns1035_label(value), value


def test_subdomains() -> None:
    assert len(SUBDOMAIN_253) == 253
    for value in ("a", "example.com", "mutate-0.ops.example.com", "1.2", SUBDOMAIN_253):
        assert is_dns_subdomain(value), value
    for value in ("", ".", "a.", ".a", "a..b", "A.b", "a_b.c", SUBDOMAIN_253 + "b", "a\n", None):
        assert not is_dns_subdomain(value), value
        assert not is_dns_subdomain(value, label_limit=False), value


def test_the_label_limit_inside_subdomains_is_dns_not_kube_apiserver() -> None:
    long_label = "a" * 64 + ".example.com"
    assert not is_dns_subdomain(long_label)
    assert is_dns_subdomain(long_label, label_limit=False)  # IsDNS1123Subdomain accepts it


def test_dns_label_returns_the_value_or_names_it_and_the_rule() -> None:
    assert dns_label("ops", "Application name") == "ops"
    with pytest.raises(ValueError) as info:
        dns_label(7, "TLS Secret name")
    assert str(info.value).startswith("TLS Secret name must be a Kubernetes DNS label, got 7: ")
    assert "RFC 1123" in str(info.value) and "e.g. 'my-operator'" in str(info.value)
