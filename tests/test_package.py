import importlib.metadata

import cloudcoil_sync


def test_version_matches_distribution_metadata() -> None:
    assert cloudcoil_sync.__version__ == importlib.metadata.version("cloudcoil-sync")


def test_every_top_level_name_resolves_to_its_concept_module() -> None:
    import cloudcoil_sync.application
    import cloudcoil_sync.controller

    assert cloudcoil_sync.Application is cloudcoil_sync.application.Application
    assert cloudcoil_sync.Wait is cloudcoil_sync.controller.Wait
    for name in cloudcoil_sync.__all__:
        assert getattr(cloudcoil_sync, name) is not None


def test_unknown_top_level_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no_such_name"):
        cloudcoil_sync.no_such_name  # noqa: B018


def test_all_lists_exactly_the_lazy_exports() -> None:
    lazy = set(cloudcoil_sync._MODULE_OF)
    assert set(cloudcoil_sync.__all__) == lazy | {"__version__"}
