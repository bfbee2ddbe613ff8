"""Checks of what goes into the Deployment: image references and resource quantities.

The image grammar is the distribution reference format that container runtimes parse
(``[domain[:port]/]path[:tag][@algorithm:hex]``); quantities are Kubernetes resource quantities
in the forms a manifest normally uses (``250m``, ``0.5``, ``128Mi``, ``1G``, ``1e3``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

__all__ = ["check_image", "check_resources", "quantity"]

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
_MAX_NAME = 255

_SUFFIXES: dict[str, Decimal | int] = {
    "": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
_QUANTITY = re.compile(
    r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<suffix>[a-zA-Z]*|[eE][-+]?[0-9]+)"
)
RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage")


def check_image(image: str) -> str:
    """``image`` if it is a valid image reference; ``ValueError`` saying why not."""
    match = _REFERENCE.fullmatch(image)
    first = image.split("/", 1)[0]
    is_domain = "/" in image and ("." in first or ":" in first or first == "localhost")
    if match is None or not (is_domain or re.fullmatch(_COMPONENT, re.split("[:@]", first)[0])):
        raise ValueError(
            f"image {image!r} is not a valid image reference: expected "
            "[registry/]name[:tag][@digest] in lower case, e.g. example.com/widgets:v1"
        )
    if len(match["name"]) > _MAX_NAME:
        raise ValueError(f"image {image!r}: the repository name is longer than {_MAX_NAME}")
    return image


def quantity(text: str) -> Decimal:
    """The value of a resource quantity (``128Mi`` → 134217728); ``ValueError`` if invalid."""
    match = _QUANTITY.fullmatch(text)
    suffix = match["suffix"] if match else ""
    try:
        if match is None:
            raise InvalidOperation
        number = Decimal(match["number"])
        if suffix[:1] in ("e", "E"):
            return number * Decimal(10) ** int(suffix[1:])
        return number * Decimal(_SUFFIXES[suffix])
    except (InvalidOperation, KeyError):
        raise ValueError(
            f"{text!r} is not a resource quantity (e.g. 100m, 0.5, 128Mi, 1Gi)"
        ) from None


def check_resources(requests: dict[str, str], limits: dict[str, str]) -> dict[str, dict[str, str]]:
    """A container's ``resources``; ``ValueError`` naming a bad name, quantity or a request
    above its limit (which the API server would reject)."""
    for kind, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            if name not in RESOURCE_NAMES:
                raise ValueError(
                    f"resource {kind}: unknown resource {name!r} "
                    f"(expected one of {', '.join(RESOURCE_NAMES)})"
                )
            try:
                quantity(value)
            except ValueError as exc:
                raise ValueError(f"resource {kind}.{name}: {exc}") from None
    for name, value in requests.items():
        limit = limits.get(name)
        if limit is not None and quantity(value) > quantity(limit):
            raise ValueError(f"resource requests.{name} {value} is above its limit {limit}")
    out: dict[str, dict[str, str]] = {}
    if requests:
        out["requests"] = dict(requests)
    if limits:
        out["limits"] = dict(limits)
    return out
