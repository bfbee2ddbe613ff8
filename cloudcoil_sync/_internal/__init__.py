"""Internals shared by every package of cloudcoil_sync: not part of the public API."""
