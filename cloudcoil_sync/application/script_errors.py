"""One-line errors for definition mistakes in an operator script.

``python op.py manifests`` first runs the script's module-level code, which builds the
Application, its controllers and routes, and only then reaches ``app.main()``. A mistake there
(``Application("Bad_Name")``, ``workers=0``, an ``async def`` handler) raises ``ValueError`` or
``TypeError`` before the command line can report it. When a script imports
``cloudcoil_sync.application`` this module installs a ``sys.excepthook`` that prints such an
uncaught error as ``Error: op.py:12: <message>`` on stderr (exit status 1), like every other
CLI error. Only errors raised by a ``raise`` statement of cloudcoil_sync, called directly from
code outside it, qualify; everything else (errors of the user's own code or of other
libraries, interactive sessions, ``CLOUDCOIL_TRACEBACK=1``) keeps the normal traceback. Library
use is unchanged: ``Application(...)`` still raises at once, and a caught exception never
reaches the hook.
"""

from __future__ import annotations

import os
import sys
import traceback
from types import TracebackType

__all__ = ["TRACEBACK_ENV", "definition_site", "install_excepthook"]

TRACEBACK_ENV = "CLOUDCOIL_TRACEBACK"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _ours(frame: traceback.FrameSummary) -> bool:
    return os.path.abspath(frame.filename).startswith(_PACKAGE)


def definition_site(tb: TracebackType | None) -> traceback.FrameSummary | None:
    """The caller's frame if the error is a deliberate ``raise`` of cloudcoil_sync reached
    directly from outside it (no user callback in between), else None."""
    frames = traceback.extract_tb(tb)
    if not frames or not _ours(frames[-1]):
        return None
    if not (frames[-1].line or "").lstrip().startswith("raise "):
        return None  # an internal failure, not a validation message: keep the traceback
    outside = [i for i, frame in enumerate(frames) if not _ours(frame)]
    return frames[outside[-1]] if outside else None


def _where(frame: traceback.FrameSummary) -> str:
    path = os.path.relpath(frame.filename)
    return f"{frame.filename if path.startswith('..') else path}:{frame.lineno}"


def _hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    site = definition_site(tb) if issubclass(exc_type, ValueError | TypeError) else None
    if site is None or os.environ.get(TRACEBACK_ENV):
        sys.__excepthook__(exc_type, exc, tb)
        return
    message = " ".join(str(exc).split()) or exc_type.__name__
    sys.stderr.write(f"Error: {_where(site)}: {message}\n")
    sys.stderr.flush()


def install_excepthook() -> None:
    """Install the hook when a script (not an interactive session) is running and no other
    hook was installed."""
    main = sys.modules.get("__main__")
    if sys.flags.interactive or not getattr(main, "__file__", None):
        return
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _hook
