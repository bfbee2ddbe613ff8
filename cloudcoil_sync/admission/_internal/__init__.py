"""The implementation behind `cloudcoil_sync.admission`: not part of the public API.

Import supported names from `cloudcoil_sync.admission`; modules here may change in any release."""
