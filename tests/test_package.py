import importlib.metadata

import cloudcoil_sync


def test_version_matches_distribution_metadata() -> None:
    assert cloudcoil_sync.__version__ == importlib.metadata.version("cloudcoil-sync")
