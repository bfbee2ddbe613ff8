"""The implementation behind `cloudcoil_sync.testing`: not part of the public API.

Import supported names from `cloudcoil_sync.testing`; modules here may change in any release."""
