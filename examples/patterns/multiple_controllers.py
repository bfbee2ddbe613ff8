"""Multiple controllers in one Application: reusable groups sharing one operator.

``reloader()`` (dependency_rollout.py) and ``summary()`` (workload_summary.py) are Controller
groups defined without an Application; ``app.include`` adds them to this one. They share the
Config (one connection pool), the informers (both watch Deployments: one list/watch), the
generated RBAC (merged into one Role), and one leader election: only the leader runs them.

    python examples/patterns/multiple_controllers.py manifests
"""

from __future__ import annotations

from dependency_rollout import reloader
from workload_summary import summary

from cloudcoil_sync.application import Application

__all__ = ["app"]

app = Application("workloads", leader_election=True)
app.include(reloader())
app.include(summary())

if __name__ == "__main__":
    app.main()
