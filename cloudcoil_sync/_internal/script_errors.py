"""One-line errors for definition mistakes in an operator script.

``python op.py manifests`` first runs the script's module-level code, which builds the
Application, its controllers and routes, and only then reaches ``app.main()``. A mistake there
(``Application("Bad_Name")``, ``workers=0``, an ``async def`` handler) raises ``ValueError`` or
``TypeError`` before the command line can report it. So the definition constructors
(``Application``, ``Controller``, ``LeaderElection``, ``HealthServer``, ``RBACRule``,
``WebhookServer``, ``CRD``, ``AdmissionRoutes``, ``@custom_resource``) call `install_for_script`
first, and ``app.main()`` calls `install_excepthook`: when the running script's own code is
building them, a ``sys.excepthook`` prints such an uncaught error as ``Error: op.py:12:
<message>`` on stderr (exit status 1), like every other CLI error. Importing installs nothing,
nor does building definitions from a library, a test or an interactive session. Only errors
raised by a ``raise`` statement of cloudcoil_sync, called directly from code outside it, qualify;
everything else (errors of the user's own code or of other libraries, ``CLOUDCOIL_TRACEBACK=1``)
keeps the normal traceback. Library use is unchanged: ``Application(...)`` still raises at once,
and a caught exception never reaches the hook.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from types import FrameType, TracebackType

__all__ = ["TRACEBACK_ENV", "definition_site", "install_excepthook", "install_for_script"]

TRACEBACK_ENV = "CLOUDCOIL_TRACEBACK"
# The package root (this module is cloudcoil_sync/_internal/script_errors.py).
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


def install_for_script() -> None:
    """`install_excepthook` when the caller is the running script's own definition code."""
    if sys.excepthook is sys.__excepthook__ and _called_by_script(inspect.currentframe()):
        install_excepthook()


def _called_by_script(frame: FrameType | None) -> bool:
    """Whether every caller outside cloudcoil_sync is the script (``__main__``) or module-level
    code it imports, down to the script itself: a test runner's or library's functions are not."""
    seen_main = False
    while frame is not None:
        code = frame.f_code
        name = frame.f_globals.get("__name__")
        if name == "__main__":
            seen_main = True
        elif not (
            code.co_filename.startswith(("<", _PACKAGE))  # ours, importlib, generated __init__
            or code.co_name == "<module>"  # a module the script imports, running its body
            or name == "runpy"  # python -m op
        ):
            return False
        frame = frame.f_back
    return seen_main
