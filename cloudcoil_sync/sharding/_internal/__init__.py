"""The implementation behind `cloudcoil_sync.sharding`: not part of the public API.

Import supported names from `cloudcoil_sync.sharding`; modules here may change in any release."""
