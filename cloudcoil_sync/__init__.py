"""cloudcoil_sync: a synchronous, threaded Kubernetes operator framework.

The everyday names are re-exported here; each lives in the module named for its concept.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
