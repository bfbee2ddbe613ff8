"""Generate Kubernetes CRDs from the pydantic models controllers use (several versions of
one kind with `Versions`).

Pydantic validators are Python code the API server never runs: express server-side checks
with the model's types and constraints, :class:`CEL` rules, or a validating webhook.
"""

from cloudcoil_sync.crd._internal.convert import STASH_ANNOTATION, ConversionError, convert
from cloudcoil_sync.crd._internal.decorator import custom_resource
from cloudcoil_sync.crd._internal.definition import CRD
from cloudcoil_sync.crd._internal.markers import CEL, ListType, PrinterColumn, SchemaError
from cloudcoil_sync.crd._internal.versions import Version, Versions

# Other packages read a class's own declaration with ``crd.decorator.resource_options``.
__all__ = [
    "CEL",
    "CRD",
    "STASH_ANNOTATION",
    "ConversionError",
    "ListType",
    "PrinterColumn",
    "SchemaError",
    "Version",
    "Versions",
    "convert",
    "custom_resource",
]
