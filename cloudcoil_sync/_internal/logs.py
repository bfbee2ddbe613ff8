"""Logging for operator processes: one logger per component, text or JSON lines.

Components log under ``cloudcoil_sync.<component>`` (``cloudcoil_sync.controller.<name>``,
``cloudcoil_sync.manager``, ``cloudcoil_sync.application``, ``cloudcoil_sync.admission...``).
:func:`configure` is what ``run --log-level/--log-format`` calls; libraries never configure
logging themselves. During a reconcile pass every line carries the pass's context
(`pass_id`, `controller`, `kind`, `namespace`, `name`): JSON fields, or a bracketed suffix
in text (`logfields.ContextFilter`, installed on the handler `configure` adds).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from cloudcoil_sync._internal.logfields import ContextFilter

__all__ = ["FORMATS", "JSONFormatter", "TextFormatter", "configure", "get_logger"]

FORMATS = ("text", "json")
ROOT = "cloudcoil_sync"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else came from `extra=` and is emitted as a field.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)
# Record attributes emitted under another JSON key (a LogRecord's `name` is the logger's).
_RENAMED = {"object_name": "name"}
# Libraries whose INFO chatter (one line per request) drowns operator logs.
_NOISY = ("urllib3", "waitress")


def get_logger(component: str) -> logging.Logger:
    """The logger of one component: ``get_logger("controller.widgets")``."""
    return logging.getLogger(f"{ROOT}.{component}" if component else ROOT)


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, thread,
    ``extra=`` fields, and ``exception`` (the formatted traceback) when there is one.
    """

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "thread": record.threadName,
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD:
                document.setdefault(_RENAMED.get(key, key), _field(value))
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, default=str, ensure_ascii=False)


def _field(value: object) -> object:
    # json writes any tuple as a list; a tuple type with its own str (`ResourceKey`) logs as
    # that str, as `default=str` gives for every other non-JSON value.
    if isinstance(value, tuple) and type(value).__str__ is not tuple.__str__:
        return str(value)
    return value


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, then ` [pass=… kind namespace/name]` on a line logged during a pass."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        values = record.__dict__
        if "pass_id" not in values:
            return text
        namespace, name = values.get("namespace"), values.get("object_name")
        where = f"{namespace}/{name}" if namespace else f"{name}"
        suffix = f" [pass={values['pass_id']} {values.get('kind')} {where}]"
        head, newline, rest = text.partition("\n")  # before a traceback, if any
        return head + suffix + newline + rest


class _Handler(logging.StreamHandler[TextIO]):
    """Marks the handler `configure` installed, so a second call replaces it."""


def configure(level: str | int = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send every log record at `level` or above to `stream` (stderr) as `fmt` lines.

    Replaces a handler installed by an earlier call; other handlers are kept.
    """
    if fmt not in FORMATS:
        raise ValueError(f"Log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"Unknown log level {level!r}")
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JSONFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _NOISY:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
