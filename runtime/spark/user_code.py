"""User functions named in a topology (``package.module:function``), resolved for the executors.

Why a module of its own: the compiler and the per-node compile functions (:mod:`.compilers`) both
resolve user functions; here, neither imports the other for it.
"""

from __future__ import annotations

import importlib
import site
import sys
from collections.abc import Callable
from typing import Any

from pyspark import cloudpickle

__all__ = ["resolve_function"]


def resolve_function(ref: str) -> Callable[..., Any]:
    """Import ``package.module:function``; ship its module by value unless it is installed."""
    module_name, qualname = ref.split(":")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part)
    # Executors import installed packages themselves; a user's own module (next to the manifest,
    # in a notebook, in tests) travels with the function instead.
    origin = getattr(module, "__file__", None) or ""
    installed = any(origin.startswith(p) for p in (*site.getsitepackages(), sys.prefix + "/lib"))
    if not installed and module_name not in sys.builtin_module_names:
        cloudpickle.register_pickle_by_value(module)
    return target
