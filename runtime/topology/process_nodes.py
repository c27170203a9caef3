"""The custom-processor node of the logical graph: ``process`` (Kafka Streams' ``KStream.process``).

Why a module of its own: the node names a user's :class:`streamapp.runtime.processor.Processor`
class by import path, and ``describe()`` lists the state stores its ``init`` declares — found by
importing the class where imports are allowed (the builder, ``streamapp validate``/``describe``),
never in the operator, which does not import users' code. Nothing here knows about Spark.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import ClassVar

from streamapp.runtime import processor as api
from streamapp.runtime.expressions import check
from streamapp.runtime.topology import nodes

__all__ = ["ProcessNode", "problems", "resolve", "stores_of"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProcessNode(nodes.Node):
    """Runs ``processor`` (a Processor subclass by ``package.module:Class``) over a stream;
    ``returns`` is the Spark type of its values (default: the class's ``returns``, else the
    input's). ``stores``: what its ``init`` declares, when known (not part of equality)."""

    op: ClassVar[str] = "process"
    word: ClassVar[str] = "PROCESSOR"
    processor: nodes.Function
    stores: tuple[api.StoreSpec, ...] = dataclasses.field(default=(), compare=False)

    def detail(self) -> str:
        parts = [f"processor: {self.processor.ref}"]
        if self.processor.returns:
            parts.append(f"returns: {self.processor.returns}")
        if self.stores:
            parts.append(f"stores: [{', '.join(s.describe() for s in self.stores)}]")
        return ", ".join(parts)


def resolve(ref: str) -> type[api.Processor] | str:
    """The Processor class ``ref`` names, or why it cannot be used (a message for the user).

    Only call where imports are allowed (:func:`check.imports_allowed`)."""
    if message := check.check_function_ref(ref):
        return message
    module_name, qualname = ref.split(":")
    target: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    if not api.is_processor(target):
        return f"{ref!r} is not a Processor class (a subclass of streamapp.runtime.Processor)"
    assert isinstance(target, type)
    return target


def stores_of(ref: str) -> tuple[api.StoreSpec, ...]:
    """The stores the class declares, when it can be imported here and its init is valid; else ()."""
    if not check.imports_allowed():
        return ()
    target = resolve(ref)
    if isinstance(target, str):
        return ()
    try:
        return tuple(api.declared_stores(target))
    except Exception:  # noqa: BLE001 - reported by the graph checks (problems), not here
        return ()


def problems(node: ProcessNode) -> list[tuple[str, str]]:
    """Every problem of one process node: ``(suffix, message)`` as :mod:`.validate` reports them."""
    if message := check.check_function_ref(node.processor.ref):
        return [(".function", message)]
    out: list[tuple[str, str]] = []
    if check.imports_allowed():
        target = resolve(node.processor.ref)
        if isinstance(target, str):
            return [(".function", target)]
        try:
            api.declared_stores(target)
        except Exception as err:  # noqa: BLE001 - the user's init: whatever it raised is the problem
            out.append((".function", f"{node.processor.ref}: init failed: {type(err).__name__}: {err}"))
        returns = node.processor.returns or target.returns
    else:
        returns = node.processor.returns
    if returns and (message := check.check_type(returns)):
        out.append((".returns", message))
    return out
