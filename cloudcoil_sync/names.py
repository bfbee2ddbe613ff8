"""Kubernetes name rules shared by the definition layers (application, controller)."""

from __future__ import annotations

import re

__all__ = ["DNS_LABEL", "dns_label"]

#: RFC 1123 label, as Kubernetes validates namespaces and most names.
DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def dns_label(value: object, description: str) -> str:
    """`value` if it is a Kubernetes DNS label, else a `ValueError` naming it and the rule."""
    if not isinstance(value, str) or not DNS_LABEL.fullmatch(value):
        raise ValueError(
            f"{description} must be a Kubernetes DNS label, got {value!r}: a lowercase RFC 1123 "
            "label (DNS-1123) of at most 63 letters, digits and '-', starting and ending with a "
            "letter or digit, e.g. 'my-operator'"
        )
    return value
