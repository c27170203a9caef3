"""The ``harness`` fixture of the stateful Spark tests."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

import pytest
from stateful_harness import Harness

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture
def harness(spark: SparkSession, tmp_path: pathlib.Path) -> Harness:
    return Harness(spark, tmp_path)
