"""The connections' response class: http.client's, reading a plain header block without the
email package.

http.client parses every response's header block with ``email.parser`` (a feed parser, a
policy object, a ``Message``) and reads it back through that policy: about a hundred Python
calls per response, a tenth of this process's CPU per reconciled object. A block of plain
``Name: value`` lines (each line's name made of the characters the feed parser accepts, no
folded line, no bare CR) is read here into the same kind of `HTTPMessage`, with the values
the compat32 policy would give; any other block goes to http.client's parser unchanged, so
its defects still reach urllib3's header check.
"""

from __future__ import annotations

import re
from email.parser import Parser
from http.client import (
    CONTINUE,
    NO_CONTENT,
    NOT_MODIFIED,
    HTTPException,
    HTTPMessage,
    HTTPResponse,
    LineTooLong,
    UnknownProtocol,
)
from typing import IO, Any

__all__ = ["LeanResponse", "parse_head"]

_MAXLINE = 65536  # http.client's limits for one header line and for the number of lines
_MAXHEADERS = 100
# What email.feedparser takes for a header line: a name of printable ASCII but ':', a colon.
_NAME = re.compile(rb"[!-9;-~]+:")
_END = (b"\r\n", b"\n", b"")


class LeanMessage(HTTPMessage):
    """An `HTTPMessage` whose `get` and `items` read the stored values directly.

    Its values are latin-1 text (as http.client decodes a header block), which the compat32
    policy's fetch returns unchanged: the same answers without a policy call per value.
    """

    def get(self, name: str, failobj: Any = None) -> Any:
        name = name.lower()
        for key, value in self._headers:  # type: ignore[attr-defined]
            if key.lower() == name:
                return value
        return failobj

    def items(self) -> list[tuple[str, Any]]:
        return list(self._headers)  # type: ignore[attr-defined]


def _read_lines(fp: IO[bytes]) -> list[bytes]:
    """The header block's lines, up to its blank line, with http.client's limits."""
    lines: list[bytes] = []
    while True:
        line = fp.readline(_MAXLINE + 1)
        if len(line) > _MAXLINE:
            raise LineTooLong("header line")
        lines.append(line)
        if len(lines) > _MAXHEADERS:
            raise HTTPException(f"got more than {_MAXHEADERS} headers")
        if line in _END:
            return lines


def parse_head(lines: list[bytes]) -> HTTPMessage:
    """The header block as http.client's ``parse_headers`` would give it."""
    message = LeanMessage()
    store = message._headers.append  # type: ignore[attr-defined]  # `set_raw`, without its call
    for line in lines[:-1]:
        named = _NAME.match(line)
        if named is None or b"\r" in line[:-2]:  # folded, malformed, a bare CR: email's
            return _email_parse(lines)
        colon = named.end()
        value = line[colon:].decode("iso-8859-1").lstrip(" \t").rstrip("\r\n")
        store((line[: colon - 1].decode("iso-8859-1"), value))
    message._payload = ""  # type: ignore[attr-defined]  # the feed parser's `set_payload("")`
    return message


def _email_parse(lines: list[bytes]) -> HTTPMessage:
    text = b"".join(lines).decode("iso-8859-1")
    message: HTTPMessage = Parser(_class=HTTPMessage).parsestr(text)
    return message


# The http.client internals `begin` calls and the message's store: in every CPython 3 so far;
# if one goes, responses begin as http.client's own.
_USABLE = all(hasattr(HTTPResponse, name) for name in ("_read_status", "_check_close")) and (
    isinstance(getattr(LeanMessage(), "_headers", None), list)
    and hasattr(LeanMessage(), "_payload")
)


class LeanResponse(HTTPResponse):
    """http.client's response with `parse_head` for the header block (``begin`` as
    http.client's own, which reads it through a module function no subclass can replace)."""

    def begin(self) -> None:
        if self.headers is not None or self.debuglevel > 0 or not _USABLE:  # as http.client
            super().begin()
            return
        while True:  # until a final (non-100) status
            version, status, reason = self._read_status()
            if status != CONTINUE:
                break
            _read_lines(self.fp)
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise UnknownProtocol(version)
        self.headers = self.msg = parse_head(_read_lines(self.fp))
        encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(encoding) and encoding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        if status in (NO_CONTENT, NOT_MODIFIED) or 100 <= status < 200 or self._method == "HEAD":
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True
