"""Kubernetes name rules: the one home of the DNS-1123 and DNS-1035 checks.

The predicates answer whether a value follows a rule; each layer raises its own message
(tests and users rely on them), and `dns_label` is the check the definition layers share.
"""

from __future__ import annotations

import re
from typing import TypeGuard

__all__ = [
    "DNS_LABEL",
    "DNS_LABEL_MAX",
    "DNS_SUBDOMAIN_MAX",
    "dns_label",
    "is_dns1035_label",
    "is_dns_label",
    "is_dns_subdomain",
]

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253

#: RFC 1123 label, as Kubernetes validates namespaces and most names.
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")


def is_dns_label(value: object) -> TypeGuard[str]:
    """An RFC 1123 label (DNS-1123): at most 63 lowercase letters, digits and '-', starting
    and ending with a letter or digit."""
    return isinstance(value, str) and DNS_LABEL.fullmatch(value) is not None


def is_dns1035_label(value: object) -> TypeGuard[str]:
    """An RFC 1035 label (DNS-1035): a DNS-1123 label that starts with a letter, as resource
    plurals and CRD versions are."""
    return isinstance(value, str) and _DNS1035_LABEL.fullmatch(value) is not None


def is_dns_subdomain(value: object, *, label_limit: bool = True) -> TypeGuard[str]:
    """An RFC 1123 subdomain: dot-separated labels, at most 253 characters in all.

    With `label_limit` each label also keeps DNS's 63-character limit. kube-apiserver's own
    check (IsDNS1123Subdomain) does not apply it, so the emulator passes False.
    """
    if (
        not isinstance(value, str)
        or len(value) > DNS_SUBDOMAIN_MAX
        or not _SUBDOMAIN.fullmatch(value)
    ):
        return False
    return not label_limit or all(len(part) <= DNS_LABEL_MAX for part in value.split("."))


def dns_label(value: object, description: str) -> str:
    """`value` if it is a Kubernetes DNS label, else a `ValueError` naming it and the rule."""
    if not is_dns_label(value):
        raise ValueError(
            f"{description} must be a Kubernetes DNS label, got {value!r}: a lowercase RFC 1123 "
            "label (DNS-1123) of at most 63 letters, digits and '-', starting and ending with a "
            "letter or digit, e.g. 'my-operator'"
        )
    return value
