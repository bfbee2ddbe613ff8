"""Admission policies declared as methods of a custom resource model.

```python
@custom_resource(plural="widgets")
class Widget(Resource):
    @staticmethod
    @validating()
    def check(request: AdmissionRequest[Widget]) -> None: ...
```

The decorators only attach metadata; `AdmissionRoutes.register(Widget)` (and an
`Application` whose CRDs include `Widget`) turns them into routes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from cloudcoil_sync._internal.callables import function_name, is_async

__all__ = ["AdmissionMethod", "admission_methods", "mutating", "validating"]

Operation = Literal["CREATE", "UPDATE", "DELETE"]
FailurePolicy = Literal["Fail", "Ignore"]
F = TypeVar("F", bound=Callable[..., Any])

ATTRIBUTE = "__cloudcoil_admission__"


@dataclass(frozen=True)
class AdmissionMethod:
    """The route options one decorated method declares."""

    mutation: bool
    path: str | None
    operations: tuple[Operation, ...]
    subresource: str
    timeout_seconds: int
    failure_policy: FailurePolicy


def _decorate(options: AdmissionMethod) -> Callable[[F], F]:
    def decorate(handler: F) -> F:
        if isinstance(handler, classmethod | staticmethod):
            raise TypeError(
                "Admission handlers must be plain functions; put @classmethod/@staticmethod "
                "outermost"
            )
        if is_async(handler):
            raise TypeError(
                f"{function_name(handler)}: admission handlers must be synchronous; "
                "use def, not async def"
            )
        if hasattr(handler, ATTRIBUTE):
            raise ValueError("An admission method can declare only one policy")
        setattr(handler, ATTRIBUTE, options)
        return handler

    return decorate


def mutating(
    *,
    path: str | None = None,
    operations: Sequence[Operation] = ("CREATE", "UPDATE"),
    subresource: str = "",
    timeout_seconds: int = 5,
    failure_policy: FailurePolicy = "Fail",
) -> Callable[[F], F]:
    """Mark a resource class/static method that returns the edited resource (or None)."""
    return _decorate(
        AdmissionMethod(True, path, tuple(operations), subresource, timeout_seconds, failure_policy)
    )


def validating(
    *,
    path: str | None = None,
    operations: Sequence[Operation] = ("CREATE", "UPDATE"),
    subresource: str = "",
    timeout_seconds: int = 5,
    failure_policy: FailurePolicy = "Fail",
) -> Callable[[F], F]:
    """Mark a resource class/static method; raise AdmissionDenied to reject."""
    return _decorate(
        AdmissionMethod(
            False, path, tuple(operations), subresource, timeout_seconds, failure_policy
        )
    )


@dataclass(frozen=True)
class DeclaredMethod:
    name: str
    handler: Callable[..., Any]
    options: AdmissionMethod
    needs_client: bool


def admission_methods(model: type[Any]) -> list[DeclaredMethod]:
    """Decorated admission methods of `model`, honouring ordinary attribute shadowing."""
    members: dict[str, Any] = {}
    for base in reversed(model.__mro__):
        members.update(vars(base))
    found = []
    for name, member in members.items():
        function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
        options = getattr(function, ATTRIBUTE, None)
        if not isinstance(options, AdmissionMethod):
            continue
        if not isinstance(member, classmethod | staticmethod):
            raise TypeError(f"{model.__name__}.{name} needs @classmethod or @staticmethod")
        handler = getattr(model, name)
        parameters = list(inspect.signature(handler).parameters.values())
        if len(parameters) not in (1, 2) or any(
            p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters
        ):
            raise TypeError(f"{model.__name__}.{name} must take request and optionally client")
        found.append(DeclaredMethod(name, handler, options, len(parameters) == 2))
    return found
