"""Test support: a Kubernetes API emulator and pytest fixtures."""

__all__: list[str] = []
