"""The implementation behind `cloudcoil_sync.application`: not part of the public API.

Import supported names from `cloudcoil_sync.application`; modules here may change in any release."""
