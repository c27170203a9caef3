"""Benchmark probe: adds the progress listener to the SparkSession a ``streamapp run`` builds.

Active only when the harness puts this folder on PYTHONPATH and sets STREAMAPP_BENCH_PROGRESS. It
wraps ``SparkSession.Builder.getOrCreate`` when ``pyspark.sql.session`` is first imported, so Python
processes that never import PySpark (and Spark's Python workers, which never build a session) are
untouched. Another ``sitecustomize`` later on sys.path (a distribution's) still runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_TARGET = "pyspark.sql.session"


def _patch(module: Any) -> None:
    import bench_progress

    original = module.SparkSession.Builder.getOrCreate

    def get_or_create(self: Any) -> Any:
        session = original(self)
        try:
            bench_progress.install(session)
        except Exception as exc:  # noqa: BLE001 - the probe must never break the measured app
            print(f"bench probe: progress probe not installed: {exc!r}", file=sys.stderr)
        return session

    module.SparkSession.Builder.getOrCreate = get_or_create


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            # A zip importer is one loader for many modules: patch only the target, then restore.
            exec_module(module)
            if module.__name__ == _TARGET:
                loader.exec_module = exec_module  # type: ignore[method-assign]
                _patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def _chain() -> None:
    """Run the next sitecustomize on sys.path, the one this module shadows."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if entry and os.path.abspath(entry) != here:
            candidate = os.path.join(entry, "sitecustomize.py")
            if os.path.isfile(candidate):
                spec = importlib.util.spec_from_file_location("_bench_shadowed_sitecustomize", candidate)
                if spec and spec.loader:
                    spec.loader.exec_module(importlib.util.module_from_spec(spec))
                return


if os.environ.get("STREAMAPP_BENCH_PROGRESS"):
    sys.meta_path.insert(0, _Finder())
_chain()
