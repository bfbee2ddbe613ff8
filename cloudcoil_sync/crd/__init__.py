"""Generate single-version Kubernetes CRDs from the pydantic models controllers use.

Pydantic validators are Python code the API server never runs: express server-side checks
with the model's types and constraints, :class:`CEL` rules, or a validating webhook.
"""

from cloudcoil_sync.crd._internal.decorator import custom_resource
from cloudcoil_sync.crd._internal.definition import CRD
from cloudcoil_sync.crd._internal.markers import CEL, ListType, PrinterColumn, SchemaError

# Other packages read a class's own declaration with ``crd.decorator.resource_options``.
__all__ = ["CEL", "CRD", "ListType", "PrinterColumn", "SchemaError", "custom_resource"]
