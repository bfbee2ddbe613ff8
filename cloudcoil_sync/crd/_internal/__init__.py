"""The implementation behind `cloudcoil_sync.crd`: not part of the public API.

Import supported names from `cloudcoil_sync.crd`; modules here may change in any release."""
