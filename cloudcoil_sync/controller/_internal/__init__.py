"""The implementation behind `cloudcoil_sync.controller`: not part of the public API.

Import supported names from `cloudcoil_sync.controller`; modules here may change in any release."""
