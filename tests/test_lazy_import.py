"""``squall`` and ``squall.trident`` load their names at first use (PEP 562), so a process imports
only what it asks for: Spark's Python processes for Trident on Spark import
``squall.trident.spark.source`` to unpickle a source, and each paid for all of squall before.
Every check runs in a fresh interpreter, whose ``sys.modules`` shows what an import loaded."""

from __future__ import annotations

import importlib.util

import pytest

import squall
import squall.drpc
import squall.trident

from .test_layers import modules_after

# What none of Spark's processes that only unpickle the source needs: the engine, the features,
# the master, Trident's builder, planner, coordinator and states.
HEAVY = ("squall.engine", "squall.metric", "squall.state", "squall.windowing", "squall.drpc", "squall.multilang",
         "squall.cluster", "squall._nimbus", "squall._transactional", "squall._topology", "squall.trident.fluent",
         "squall.trident.planner", "squall.trident.coordinator", "squall.trident.builtin",
         "squall.trident.processors", "squall.trident.state", "squall.trident.spark.runner",
         "squall.trident.spark.compiler")


def heavy(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m.startswith(HEAVY)]


def test_import_squall_loads_only_the_check_of_its_compiled_module():
    # and the loader of its names (squall._lazy, which imports nothing of squall)
    assert set(modules_after("import squall")) <= {"squall", "squall._native", "squall._speedups", "squall._lazy"}


def test_a_name_of_squall_loads_its_own_module_only():
    loaded = modules_after("from squall import Fields\nassert Fields.__module__ == 'squall._fields'")

    assert "squall._fields" in loaded
    assert heavy(loaded) == []


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs pyspark (the trident-spark extra)")
def test_the_spark_source_loads_none_of_the_engine_the_features_or_tridents_builder():
    loaded = modules_after("import squall.trident.spark.source")

    assert "squall.trident.spark.source" in loaded
    assert heavy(loaded) == []


def test_every_host_registers_the_features_on_the_extension_points():
    # `import squall` no longer loads the features, nor `squall.cluster`; every host imports
    # squall.cluster.features, which does
    for code in ("from squall import LocalCluster", "import squall.cluster.worker_process",
                 "import squall.cluster.spark_task"):
        loaded = modules_after(code)
        assert {"squall.metric", "squall.state", "squall.windowing"} <= set(loaded), code


@pytest.mark.parametrize("package", [squall, squall.trident, squall.drpc], ids=lambda p: p.__name__)
def test_every_public_name_exists_as_before(package):
    names = set(package.__all__)

    assert names <= set(dir(package))
    for name in sorted(names):
        value = getattr(package, name)
        assert getattr(package, name) is value  # the first use keeps it: no second import
    scope: dict = {}
    exec(f"from {package.__name__} import *", scope)  # noqa: S102 (the star import a user may write)
    assert names <= set(scope)


@pytest.mark.parametrize("package", ["squall", "squall.trident"])
def test_a_name_the_package_does_not_have_is_an_attribute_error_naming_it(package):
    loaded = modules_after(f"import {package}\n"
                           f"try:\n    {package}.NoSuchName\nexcept AttributeError as e:\n"
                           "    assert 'NoSuchName' in str(e)\nelse:\n    raise AssertionError('no error')")

    assert heavy(loaded) == []


# Each imported first in its own interpreter: with squall's names lazy, a module is no longer
# imported after all of squall, so a circle between two modules would show here.
ALONE = ["squall", "squall.trident", "squall.trident.spark", "squall.trident.spark.source",
         "squall.trident.spark.runner", "squall.trident.spark.compiler", "squall.trident.spark.daemon",
         "squall.trident.spark.launcher", "squall.trident.fluent", "squall.trident.coordinator", "squall.engine.loop",
         "squall.engine.worker", "squall.metric", "squall.state", "squall.windowing", "squall.drpc", "squall.multilang",
         "squall.cluster", "squall.cluster.local", "squall.worker", "squall.testing", "squall.cli", "squall.flux",
         "squall.sparse", "squall.external", "squall.cluster.client", "squall.cluster.master", "squall.cli._cluster",
         "squall.cli._sparse", "squall.cli._trident", "squall.drpc.client"]


@pytest.mark.parametrize("module", ALONE)
def test_each_public_package_imports_alone(module):
    if module.startswith("squall.trident.spark.") and importlib.util.find_spec("pyspark") is None:
        pytest.skip("needs pyspark (the trident-spark extra)")

    assert module in modules_after(f"import {module}")
