"""One API request as the object layer sees it."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from cloudcoil_sync.testing._internal.managed import Writer, answered_fields, manager_name
from cloudcoil_sync.testing._internal.rbac import User
from cloudcoil_sync.testing._internal.resources import ResourceType

__all__ = ["Req", "now_iso"]


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Req:
    rt: ResourceType
    namespace: str
    name: str = ""
    subresource: str = ""
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"
    user_agent: str = ""
    # The authenticated user of an HTTP request; None for the emulator's own writes.
    user: User | None = None
    # ``Warning`` header values for the answer (unknown fields under fieldValidation=Warn).
    warnings: list[str] = field(default_factory=list)
    # A custom resource's CRD schema, set by the write path (managedFields follow its lists).
    schema: dict[str, Any] | None = None

    @property
    def dry_run(self) -> bool:
        return self.query.get("dryRun") == "All"

    def warn(self, text: str) -> None:
        """Add a ``Warning: 299 - "text"`` header to the answer as kube-apiserver's warning
        recorder does: empty, repeated or control-character texts are dropped."""
        if not text or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
            return
        header = '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if header not in self.warnings:
            self.warnings.append(header)

    def answered_fields(
        self, api_version: str, request: dict[str, Any], subresource: str = ""
    ) -> list[dict[str, Any]]:
        """managedFields of an answered create (review, TokenRequest) with ``request``'s fields."""
        now = now_iso()
        manager = manager_name(self.user_agent, self.query.get("fieldManager"))
        return answered_fields(Writer(manager, api_version, subresource, False, now), request)

    def writer(self, now: str) -> Writer:
        return Writer(
            manager_name(self.user_agent, self.query.get("fieldManager")),
            self.rt.api_version,
            self.subresource if self.subresource in ("status", "scale") else "",
            self.schema if self.schema is not None else not self.rt.builtin,
            now,
        )
