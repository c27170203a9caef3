"""The DSL's foundation: user logic as graph values, durations, window specs, joins, the builder seam.

Why a module of its own: the builder (a source's error policy) and the handles of
:mod:`streamapp.runtime.topology.dsl` (every operation's logic, windows and joins) both need these;
kept below both, it imports neither. The handles add nodes through :class:`GraphBuilder`, a
protocol the builder satisfies, so the DSL has no import cycle, not even one for type checking.
User logic is a Spark SQL expression (a string), a module-level Python function, or
``Function("pkg.mod:fn")``; a function is recorded by import path so that a topology can be written
out as YAML and loaded again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from streamapp.runtime import errors
from streamapp.runtime.topology import aggregate_nodes, durations, join_nodes, nodes

__all__ = [
    "GraphBuilder",
    "Logic",
    "SessionWindows",
    "SlidingWindows",
    "TimeWindows",
    "add_join",
    "check_policy",
    "to_function",
    "to_logic",
]

#: What a user may pass as logic: an expression, ``Function(...)`` or a module-level callable.
Logic = str | nodes.Function | Callable[..., Any]


def to_logic(logic: Logic, *, returns: str | None = None) -> nodes.Logic:
    """User logic as a graph value; a callable is recorded by its import path ``module:qualname``."""
    if isinstance(logic, str):
        return nodes.Expr(logic)
    if isinstance(logic, nodes.Function):
        return logic if logic.returns or not returns else nodes.Function(logic.ref, returns)
    if callable(logic):
        qualname = getattr(logic, "__qualname__", "")
        module = getattr(logic, "__module__", None)
        if not module or "<lambda>" in qualname or "<locals>" in qualname:
            raise errors.TopologyError(
                f"{qualname or logic!r} cannot be referenced by import path: use a module-level "
                "function (a lambda or a nested function cannot be written to a manifest)"
            )
        return nodes.Function(f"{module}:{qualname}", returns)
    raise errors.TopologyError(
        f"user logic must be an expression, a function or Function(...), not {logic!r}"
    )


def to_function(logic: Logic | None, what: str) -> nodes.Function | None:
    """Logic that must be a Python function (an initializer, adder, reducer…); ``what`` names it."""
    if logic is None:
        return None
    converted = to_logic(logic)
    if not isinstance(converted, nodes.Function):
        raise errors.TopologyError(f"the {what} must be a Python function, not the expression {logic!r}")
    return converted


class GraphBuilder(Protocol):
    """What a handle of :mod:`streamapp.runtime.topology.dsl` asks of the builder that holds the
    graph (:class:`~streamapp.runtime.topology.builder.StreamsBuilder` is one): add a node after
    ``parents`` and return its name (``name``, or a generated one)."""

    def _add(
        self, node_type: type[nodes.Node], parents: tuple[str, ...], name: str | None, **fields: Any
    ) -> str: ...


def add_join(
    builder: GraphBuilder,
    node_type: type[join_nodes.JoinNode],
    left: str,
    right: str,
    joiner: Logic,
    windows: join_nodes.JoinWindows | None,
    returns: str | None,
    name: str | None,
    key: Logic | None = None,
    foreign_key: Logic | None = None,
) -> str:
    """One join node; ``joiner`` reads ``left`` and ``right`` (an expression) or is a Python
    function ``(left, right)`` / ``(key, left, right)`` run as a vectorised UDF."""
    return builder._add(
        node_type,
        (left, right),
        name,
        joiner=to_logic(joiner, returns=returns),
        windows=windows,
        key=None if key is None else to_logic(key),
        foreign_key=None if foreign_key is None else to_logic(foreign_key),
    )


def check_policy(policy: str, topic: str | None) -> None:
    """A source's ``deserialization_errors`` and ``dead_letter_topic`` go together."""
    if policy not in ("fail", "skip", "deadLetter"):
        raise errors.TopologyError(f"deserialization_errors must be fail, skip or deadLetter, not {policy!r}")
    if policy == "deadLetter" and not topic:
        raise errors.TopologyError("deserialization_errors='deadLetter' needs a dead_letter_topic")
    if topic and policy != "deadLetter":
        raise errors.TopologyError(
            f"dead_letter_topic is only used with deserialization_errors='deadLetter' (not {policy!r})"
        )


def _durations(**values: Any) -> dict[str, int]:
    out = {}
    for name, value in values.items():
        try:
            out[name] = durations.to_ms(value)
        except ValueError as err:
            raise errors.TopologyError(f"{name}: {err}") from None
    return out


class TimeWindows:
    """Kafka Streams' TimeWindows: ``of_size_and_grace(size, grace)`` (tumbling), then
    ``.advance_by(advance)`` for hopping windows. Durations: ms, ``"10s"`` or timedelta."""

    @staticmethod
    def of_size_and_grace(size: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(size=size, grace=grace)
        return aggregate_nodes.Windows("tumbling", d["size"], d["size"], d["grace"])

    @staticmethod
    def of_size_with_no_grace(size: Any) -> aggregate_nodes.Windows:
        return TimeWindows.of_size_and_grace(size, 0)


class SlidingWindows:
    """Kafka Streams' SlidingWindows: windows ``[t - d, t]`` defined by record timestamps."""

    @staticmethod
    def of_time_difference_and_grace(time_difference: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(time_difference=time_difference, grace=grace)
        return aggregate_nodes.Windows("sliding", d["time_difference"], 0, d["grace"])


class SessionWindows:
    """Kafka Streams' SessionWindows: activity separated by at least ``gap``."""

    @staticmethod
    def of_inactivity_gap_and_grace(gap: Any, grace: Any) -> aggregate_nodes.Windows:
        d = _durations(gap=gap, grace=grace)
        return aggregate_nodes.Windows("session", d["gap"], 0, d["grace"])
