"""Kubernetes API client."""
