"""The Python builder: Kafka Streams' DSL in snake_case, producing the logical graph.

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream("text-lines").filter("length(value) > 0").map_values("upper(value)").to("out")
    topology = builder.build()

Every call adds one node and returns a new stream object; nothing touches Spark. User logic is a
Spark SQL expression (a string), a module-level Python function, or ``Function("pkg.mod:fn")``.
Functions are recorded by import path so a topology can be written out as YAML and loaded again
(``streamapp.runtime.manifest.to_manifest_yaml(builder.build(), name=...)``: the manifest layer
builds on this one, never the reverse).
As with Kafka Streams' ``Named.as(...)``, every operation takes an optional ``name=`` that replaces
the generated node name (the counter still advances, so later generated names do not shift).
:class:`StreamsBuilder` holds the nodes; the objects its calls return live in
:mod:`streamapp.runtime.topology.dsl` (KStream, KTable, GlobalKTable and the grouped streams and
tables), which add nodes through the :class:`~streamapp.runtime.topology.logic.GraphBuilder` protocol
this class satisfies, and the window specs in :mod:`streamapp.runtime.topology.logic`.
"""

from __future__ import annotations

from typing import Any

from streamapp.runtime import errors, serdes
from streamapp.runtime.topology import dsl, graph, join_nodes, logic, nodes, validate

__all__ = ["StreamsBuilder"]


class StreamsBuilder:
    """Collects nodes in build order; ``build()`` returns the immutable :class:`graph.Topology`."""

    def __init__(
        self,
        *,
        default_key_serde: serdes.Serde | None = None,
        default_value_serde: serdes.Serde | None = None,
        latency: str = "default",
        application_id: str | None = None,
    ) -> None:
        if latency not in ("default", "low"):
            raise errors.TopologyError(f"latency is 'default' or 'low', not {latency!r}")
        self._nodes: list[nodes.Node] = []
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self.latency = latency
        self.application_id = application_id

    def _add(
        self, node_type: type[nodes.Node], parents: tuple[str, ...], name: str | None, **fields: Any
    ) -> str:
        node_name = name or node_type.generated_name(len(self._nodes))
        if any(n.name == node_name for n in self._nodes):
            raise errors.TopologyError(f"a node named {node_name!r} already exists; names must be unique")
        self._nodes.append(node_type(name=node_name, parents=parents, **fields))
        return node_name

    def stream(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        timestamp: str | None = None,
        deserialization_errors: str = "fail",
        dead_letter_topic: str | None = None,
    ) -> dsl.KStream:
        """A KStream of one or more topics; ``timestamp`` is an expression giving event time (ms).

        ``deserialization_errors``: what a record its serdes cannot read does — ``"fail"`` stops
        the query naming it, ``"skip"`` drops it (counted), ``"deadLetter"`` writes its original
        bytes to ``dead_letter_topic`` with headers saying where it came from and why (counted)."""
        logic.check_policy(deserialization_errors, dead_letter_topic)
        node = self._add(
            nodes.Source,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp=timestamp,
            deserialization_errors=None if deserialization_errors == "fail" else deserialization_errors,
            dead_letter_topic=dead_letter_topic,
        )
        return dsl.KStream(self, node)

    def table(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
        timestamp: str | None = None,
        deserialization_errors: str = "fail",
        dead_letter_topic: str | None = None,
    ) -> dsl.KTable:
        """A KTable of a changelog topic: the latest value per key; a null value deletes the key.
        An unreadable record is never a delete: ``deserialization_errors`` as for :meth:`stream`."""
        logic.check_policy(deserialization_errors, dead_letter_topic)
        node = self._add(
            nodes.Source,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp=timestamp,
            table=True,
            deserialization_errors=None if deserialization_errors == "fail" else deserialization_errors,
            dead_letter_topic=dead_letter_topic,
        )
        return dsl.KTable(self, node)

    def global_table(
        self,
        topics: str | list[str],
        *,
        key_serde: serdes.Serde | None = None,
        value_serde: serdes.Serde | None = None,
    ) -> dsl.GlobalKTable:
        """A GlobalKTable: every task holds all of it; streams join it by a key extractor."""
        node = self._add(
            join_nodes.GlobalTableSource,
            (),
            None,
            topics=(topics,) if isinstance(topics, str) else tuple(topics),
            key_serde=key_serde,
            value_serde=value_serde,
        )
        return dsl.GlobalKTable(self, node)

    def build(self, *, check: bool = True) -> graph.Topology:
        """The topology; with ``check``, every problem (bad expression, missing serde…) raises at once."""
        topology = graph.Topology(
            nodes=tuple(self._nodes),
            default_key_serde=self.default_key_serde,
            default_value_serde=self.default_value_serde,
            latency=self.latency,
            application_id=self.application_id,
        )
        if check and (problems := validate.validate_topology(topology)):
            raise errors.TopologyError(
                "the topology is invalid:\n" + "\n".join(f"  {p}" for p in problems), problems=problems
            )
        return topology
