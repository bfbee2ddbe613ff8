"""`ManifestOptions`: how to deploy an operator, checked in one place.

``Application.manifests/to_yaml/install`` build one from their keywords (`ManifestKeywords`),
the command line from its flags; ``manifests.assemble`` and ``install`` take it as it is. A bad
option raises `OptionError` (a ``ValueError`` with cloudcoil 0.8's messages) naming the keywords
at fault, so the command line can name its flags instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from cloudcoil_sync.application._internal.extras import Extras
from cloudcoil_sync.application._internal.images import check_image, check_resources

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.settings import WebhookServer

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_REQUESTS",
    "ManifestKeywords",
    "ManifestOptions",
    "OptionError",
    "certificates_only",
]

#: The operator container's default resources: room for the models import (~80 MB) and caches.
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
DEFAULT_LIMITS = {"memory": "512Mi"}
_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----\r?\n.*?-----END CERTIFICATE-----", re.S)


class OptionError(ValueError):
    """A bad deployment option; ``options`` names the keywords at fault."""

    def __init__(self, message: str, *options: str) -> None:
        super().__init__(message)
        self.options = options


class ManifestKeywords(TypedDict, total=False):
    """The keywords of ``Application.manifests``, ``to_yaml`` and ``install``."""

    image: str | None
    command: Sequence[str] | None
    replicas: int
    include_webhooks: bool
    ca_bundle: bytes | None
    requests: Mapping[str, str] | None
    limits: Mapping[str, str] | None
    extras: Extras | None


@dataclass(frozen=True)
class ManifestOptions:
    """How to deploy: ``image`` adds the Deployment (its container ``command`` before ``run``,
    ``replicas``); ``include_webhooks=False`` leaves out the webhook Service and registrations;
    ``ca_bundle`` replaces ``WebhookServer.ca_bundle``; ``requests``/``limits`` replace the
    container's default resources (``{}``: none); ``extras`` adds the optional objects."""

    image: str | None = None
    command: Sequence[str] | None = None
    replicas: int = 1
    include_webhooks: bool = True
    ca_bundle: bytes | None = None
    requests: Mapping[str, str] | None = None
    limits: Mapping[str, str] | None = None
    extras: Extras | None = None

    def __post_init__(self) -> None:
        replicas, image, command = self.replicas, self.image, self.command
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise OptionError("replicas must be a positive integer", "replicas")
        if image is not None and (not isinstance(image, str) or not image.strip()):
            raise OptionError("image must be nonempty", "image")
        if image is not None:
            try:
                check_image(image)
            except ValueError as error:
                raise OptionError(str(error), "image") from None
        if command is not None and (
            isinstance(command, str | bytes)
            or not command
            or any(not isinstance(arg, str) or not arg for arg in command)
        ):
            raise OptionError("command must be a nonempty sequence of arguments", "command")
        if image is None and command is not None:
            raise OptionError("command requires image", "command", "image")
        if self.extras is not None and not isinstance(self.extras, Extras):
            raise TypeError("extras must be an Extras or None")
        if self.ca_bundle is not None and self.cert_manager:
            raise OptionError(
                "cert-manager injects the webhooks' CA: leave out ca_bundle",
                "ca_bundle",
                "cert_manager",
            )
        try:
            self.resources()
        except ValueError as error:
            raise OptionError(str(error), "requests", "limits") from None

    @property
    def cert_manager(self) -> bool:
        return self.extras is not None and self.extras.cert_manager

    def resources(self) -> dict[str, dict[str, str]]:
        """The container's ``resources`` (the defaults where not given)."""
        return check_resources(
            dict(DEFAULT_REQUESTS if self.requests is None else self.requests),
            dict(DEFAULT_LIMITS if self.limits is None else self.limits),
        )

    def check(self, webhook: WebhookServer | None) -> None:
        """The options against an operator's webhook server (None: it has none)."""
        if webhook is None:
            return
        if self.image is not None and not self.include_webhooks:
            raise OptionError(
                "A Deployment for this operator requires its webhook TLS configuration",
                "include_webhooks",
                "image",
            )
        if self.include_webhooks and not self.cert_manager:
            bundle = webhook.ca_bundle if self.ca_bundle is None else self.ca_bundle
            if not certificates_only(bundle):
                raise OptionError(
                    "ca_bundle must contain PEM certificate bytes", "ca_bundle", "include_webhooks"
                )


def certificates_only(bundle: bytes) -> bytes:
    """The PEM certificate blocks of ``bundle``; anything else (keys!) is dropped."""
    blocks = _CERTIFICATE.findall(bundle or b"")
    return b"".join(block.replace(b"\r\n", b"\n") + b"\n" for block in blocks)
