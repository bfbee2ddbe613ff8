"""The implementation behind `cloudcoil_sync.client`: not part of the public API.

Import supported names from `cloudcoil_sync.client`; modules here may change in any release."""
