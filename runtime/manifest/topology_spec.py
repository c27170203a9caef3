"""The manifest's ``spec.topology`` (pydantic v2): its streams, where each starts and its steps.

A topology is a list of streams; each stream starts ``from`` topics or from another stream and
applies ``steps``, one operation each, in Kafka Streams' vocabulary::

    topology:
      defaults: {keySerde: string, valueSerde: string}
      streams:
        - name: words
          from: {topic: text-lines}
          steps:
            - flatMapValues: "explode(split(lower(value), '\\\\W+'))"
            - filter: "value != ''"
            - to: {topic: words}
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic

from streamapp.runtime.manifest import base

__all__ = [
    "AggregateSpec",
    "Duration",
    "FromSpec",
    "JoinSpec",
    "JoinWindowsSpec",
    "LogicSpec",
    "MapSpec",
    "ProcessSpec",
    "ReduceSpec",
    "SerdeSpec",
    "SplitSpec",
    "Step",
    "StreamSpec",
    "ToSpec",
    "TopologySpec",
    "WindowsSpec",
]


_Model = base.CamelModel


class SerdeObject(_Model):
    name: Literal["string", "bytes", "int", "long", "double", "json"] = pydantic.Field(
        description="Wire format: Kafka's string/bytes/int/long/double serializers, or JSON."
    )
    schema_: str | None = pydantic.Field(
        default=None, alias="schema", description="JSON only: Spark DDL of the fields, e.g. 'amount DOUBLE'."
    )


SerdeSpec = Literal["string", "bytes", "int", "long", "double", "json"] | SerdeObject


class LogicObject(_Model):
    expr: str | None = pydantic.Field(
        default=None,
        description="A Spark SQL expression over key, value, timestamp, headers, partition, offset, topic.",
    )
    function: str | None = pydantic.Field(
        default=None,
        description="A Python function, 'package.module:function', run as a vectorised pandas UDF.",
    )
    returns: str | None = pydantic.Field(default=None, description="Spark SQL type a function returns.")


LogicSpec = str | LogicObject


class MapSpec(_Model):
    key: LogicSpec = pydantic.Field(description="The new key.")
    value: LogicSpec = pydantic.Field(description="The new value.")


class BranchSpec(_Model):
    name: str = pydantic.Field(description="Branch name; later streams start from '<stream>.<name>'.")
    predicate: LogicSpec = pydantic.Field(
        description="Records for which this holds (and no earlier branch did)."
    )


class SplitSpec(_Model):
    branches: list[BranchSpec] = pydantic.Field(description="Branches, tried in order.")
    default: str | None = pydantic.Field(
        default=None, description="Name of the branch for all other records."
    )


class RepartitionSpec(_Model):
    partitions: int | None = pydantic.Field(
        default=None, ge=1, description="Partition count after the shuffle (default: unchanged)."
    )
    name: str | None = pydantic.Field(
        default=None, description="Name of the repartition topic (Kafka Streams' Repartitioned.as)."
    )


class ToSpec(_Model):
    topic: str = pydantic.Field(description="Output topic.")
    key_serde: SerdeSpec | None = pydantic.Field(
        default=None, description="Key serde (default: topology defaults)."
    )
    value_serde: SerdeSpec | None = pydantic.Field(
        default=None, description="Value serde (default: topology defaults)."
    )
    partitioner: LogicSpec | None = pydantic.Field(
        default=None,
        description="The output partition as an int expression or function over the record "
        "(default: murmur2 of the key bytes, as Kafka's producer does).",
    )


class PrintSpec(_Model):
    label: str | None = pydantic.Field(default=None, description="Prefix printed before each record.")


class Empty(_Model):
    """An operation without parameters: ``{}``."""


class AggregateSpec(_Model):
    """Either a declarative aggregate (``fn`` of ``expr``) or Python functions (Kafka Streams'
    initializer, adder and, for grouped tables, subtractor)."""

    fn: Literal["sum", "min", "max", "avg", "latest", "collect_list"] | None = pydantic.Field(
        default=None,
        description="Aggregate function; latest keeps the value with the highest timestamp.",
    )
    expr: str = pydantic.Field(
        default="value", description="What fn aggregates (an expression over the record)."
    )
    initializer: str | None = pydantic.Field(
        default=None, description="Python function 'package.module:function' returning the initial aggregate."
    )
    adder: str | None = pydantic.Field(
        default=None,
        description="Python function (key, value, aggregate) or (value, aggregate) → the new aggregate.",
    )
    subtractor: str | None = pydantic.Field(
        default=None,
        description="Grouped tables: Python function removing a key's old value from the aggregate.",
    )
    returns: str | None = pydantic.Field(
        default=None, description="Spark SQL type of the aggregate (with initializer and adder)."
    )


class ReduceSpec(_Model):
    reducer: str = pydantic.Field(
        description="Python function 'package.module:function' (aggregate, value) → aggregate; "
        "the first value of a key is its initial aggregate."
    )
    subtractor: str | None = pydantic.Field(
        default=None, description="Grouped tables: Python function (aggregate, old value) → aggregate."
    )
    returns: str | None = pydantic.Field(
        default=None, description="Spark SQL type of the aggregate (default: the value's type)."
    )


class CogroupStream(_Model):
    stream: str = pydantic.Field(description="A stream that ends with groupBy or groupByKey (same key type).")
    adder: str = pydantic.Field(
        description="Python function (key, value, aggregate) → aggregate for its records."
    )


class CogroupSpec(_Model):
    """Kafka Streams' cogroup: this grouped stream and others, each with its own adder, into one
    aggregate per key."""

    adder: str = pydantic.Field(
        description="Python function (key, value, aggregate) → aggregate for this stream."
    )
    with_: list[CogroupStream] = pydantic.Field(
        alias="with", min_length=1, description="The other grouped streams and their adders."
    )
    initializer: str = pydantic.Field(description="Python function returning the initial aggregate.")
    returns: str = pydantic.Field(description="Spark SQL type of the aggregate.")


#: A duration: milliseconds, or text such as '500ms', '10s', '5m', '1h', '1d' or ISO-8601 'PT10S'.
Duration = int | str


class HoppingSpec(_Model):
    size: Duration = pydantic.Field(description="Window size.")
    advance: Duration = pydantic.Field(description="How far each window starts after the previous one.")


class WindowsSpec(_Model):
    """Exactly one window kind, with its grace period and emit strategy."""

    tumbling: Duration | None = pydantic.Field(
        default=None, description="Fixed, non-overlapping windows of this size, aligned to the epoch."
    )
    hopping: HoppingSpec | None = pydantic.Field(default=None, description="Fixed windows that overlap.")
    sliding: Duration | None = pydantic.Field(
        default=None,
        description="Windows [t - d, t] defined by record timestamps, with this maximum time difference d.",
    )
    session: Duration | None = pydantic.Field(
        default=None, description="Sessions of activity separated by at least this inactivity gap."
    )
    grace: Duration = pydantic.Field(
        default=0,
        description="How long after its end a window still accepts out-of-order records "
        "(against stream time, the max timestamp seen); later records are dropped and counted.",
    )
    emit: Literal["updates", "final"] = pydantic.Field(
        default="updates",
        description="updates: every change of a window (Kafka Streams' default); final: one result "
        "per window, once it closes.",
    )


class JoinWindowsSpec(_Model):
    """Kafka Streams' JoinWindows: timeDifference (before = after), or before and after."""

    time_difference: Duration | None = pydantic.Field(
        default=None, description="Records join when their timestamps differ by at most this."
    )
    before: Duration | None = pydantic.Field(
        default=None, description="How far a right record may be before the left one (default: after)."
    )
    after: Duration | None = pydantic.Field(
        default=None, description="How far a right record may be after the left one (default: before)."
    )
    grace: Duration = pydantic.Field(
        default=0,
        description="How long after a window's end out-of-order records are still joined; a left/outer "
        "result without a match is emitted once stream time passes the window's end plus grace.",
    )


class JoinSpec(_Model):
    """A join with another stream or table, named by its manifest stream."""

    with_: str = pydantic.Field(
        alias="with", description="The stream or table to join with (a stream's name)."
    )
    joiner: LogicSpec = pydantic.Field(
        description="The result value: a Spark SQL expression over key, left and right (the two values; "
        "null on the side without a match), or a Python function fn(left, right) or fn(key, left, right)."
    )
    windows: JoinWindowsSpec | None = pydantic.Field(
        default=None, description="Stream-stream joins only: the join window."
    )
    key: LogicSpec | None = pydantic.Field(
        default=None,
        description="GlobalKTable joins only: the table key to look up, computed from the stream record.",
    )
    foreign_key: LogicSpec | None = pydantic.Field(
        default=None,
        description="Foreign-key table-table joins only (join, leftJoin): the other table's key, computed "
        "from this table's key and value (an expression over key and value, or a Python function "
        "fn(value) or fn(key, value)); a null foreign key joins nothing.",
    )


class ProcessSpec(_Model):
    """A custom processor (StreamApp's Processor API): a Python class run per key with state and
    timers; see "Custom processors" in runtime/README.md."""

    function: str = pydantic.Field(
        description="The processor class, 'package.module:Class', a subclass of streamapp.runtime.Processor."
    )
    returns: str | None = pydantic.Field(
        default=None,
        description="Spark SQL type of the values it emits (default: the class's returns, else the "
        "input value type).",
    )


class Step(_Model):
    """Exactly one operation (and optionally the name of its node)."""

    name: str | None = pydantic.Field(
        default=None,
        description="Name of this step's node (Kafka Streams' Named.as); default: a generated name "
        "such as KSTREAM-FILTER-0000000003.",
    )
    filter: LogicSpec | None = pydantic.Field(default=None, description="Keep records for which this holds.")
    filter_not: LogicSpec | None = pydantic.Field(
        default=None, description="Drop records for which this holds."
    )
    map: MapSpec | None = pydantic.Field(default=None, description="New key and value.")
    map_values: LogicSpec | None = pydantic.Field(default=None, description="New value, same key.")
    flat_map: LogicSpec | None = pydantic.Field(default=None, description="An array of struct(key, value).")
    flat_map_values: LogicSpec | None = pydantic.Field(
        default=None, description="An array (or explode(...)) of values."
    )
    select_key: LogicSpec | None = pydantic.Field(default=None, description="New key, same value.")
    peek: LogicSpec | None = pydantic.Field(
        default=None, description="A function called on records; passes them on."
    )
    merge: list[str] | None = pydantic.Field(default=None, description="Streams merged into this one.")
    repartition: RepartitionSpec | None = pydantic.Field(
        default=None, description="Shuffle by key (records with a null key are dropped, as in Kafka Streams)."
    )
    split: SplitSpec | None = pydantic.Field(default=None, description="Named branches; ends this stream.")
    to: ToSpec | str | None = pydantic.Field(default=None, description="Write to a topic; ends this stream.")
    print: PrintSpec | None = pydantic.Field(default=None, description="Print records; ends this stream.")
    group_by: LogicSpec | None = pydantic.Field(
        default=None, description="Group by a new key (then count/aggregate)."
    )
    group_by_key: Empty | None = pydantic.Field(default=None, description="Group by the current key.")
    windowed_by: WindowsSpec | None = pydantic.Field(
        default=None, description="Window the grouped stream (then count, aggregate or reduce)."
    )
    count: Empty | None = pydantic.Field(default=None, description="Records per key, as a table.")
    aggregate: AggregateSpec | None = pydantic.Field(default=None, description="An aggregate per key.")
    reduce: ReduceSpec | None = pydantic.Field(
        default=None, description="Combine the values of a key with a Python function."
    )
    cogroup: CogroupSpec | None = pydantic.Field(
        default=None, description="Aggregate this grouped stream together with other grouped streams."
    )
    suppress: Literal["untilWindowCloses"] | None = pydantic.Field(
        default=None, description="A windowed table emits one final result per window, when it closes."
    )
    to_table: Empty | None = pydantic.Field(
        default=None, description="The stream as a table: latest value per key; a null value deletes it."
    )
    to_stream: Empty | None = pydantic.Field(default=None, description="The table's updates as a stream.")
    join: JoinSpec | None = pydantic.Field(
        default=None, description="Inner join with a table, a stream (windowed) or, for a table, a table."
    )
    left_join: JoinSpec | None = pydantic.Field(
        default=None, description="Left join: records without a match are emitted with right null."
    )
    outer_join: JoinSpec | None = pydantic.Field(
        default=None, description="Outer join of two streams (windowed) or two tables."
    )
    process: ProcessSpec | None = pydantic.Field(
        default=None,
        description="Run a custom processor class per key, with value/list/map state and timers.",
    )

    @pydantic.model_validator(mode="after")
    def _one_operation(self) -> Step:
        given = [n for n in type(self).model_fields if n != "name" and getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"a step has exactly one operation, found {len(given)}")
        return self

    def operation(self) -> tuple[str, Any]:
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if value is not None and name != "name":
                return (field.alias or name), value
        raise AssertionError("validated step without an operation")


class FromSpec(_Model):
    topic: str | None = pydantic.Field(default=None, description="Input topic.")
    topics: list[str] | None = pydantic.Field(default=None, description="Input topics (one stream).")
    stream: str | None = pydantic.Field(
        default=None, description="Continue from another stream (or '<stream>.<branch>')."
    )
    key_serde: SerdeSpec | None = pydantic.Field(default=None, description="Key serde of the topics.")
    value_serde: SerdeSpec | None = pydantic.Field(default=None, description="Value serde of the topics.")
    timestamp: str | None = pydantic.Field(
        default=None,
        description="Event time: an expression giving epoch "
        "milliseconds, e.g. 'value.ts' (default: the record timestamp).",
    )
    max_offsets_per_trigger: int | None = pydantic.Field(
        default=None,
        ge=1,
        description="At most this many records of these topics per micro-batch (back-pressure; "
        "Spark's maxOffsetsPerTrigger). Default: everything available; under exactly_once_v2 "
        "500000, so that a batch's transactions commit within their timeout.",
    )
    deserialization_errors: Literal["fail", "skip", "deadLetter"] = pydantic.Field(
        default="fail",
        description="A record whose key or value its serde cannot read: fail (stop, naming the "
        "record and why), skip (drop it, counted as skipped), or deadLetter (write its original "
        "bytes and headers to deadLetterTopic with headers naming topic, partition, offset and error; "
        "counted as dead-lettered).",
    )
    dead_letter_topic: str | None = pydantic.Field(
        default=None, description="Where deserializationErrors: deadLetter writes unreadable records."
    )
    as_: Literal["stream", "table", "globalTable"] = pydantic.Field(
        default="stream",
        alias="as",
        description="Read the topics as a KStream (default) or as a table (latest value per key; a "
        "null value deletes the key); globalTable: a table every task holds in full, joined from a "
        "stream by a key extractor (join/leftJoin with key) without repartitioning.",
    )


class StreamSpec(_Model):
    name: str | None = pydantic.Field(default=None, description="Name other streams refer to.")
    from_: FromSpec = pydantic.Field(alias="from", description="Where the stream's records come from.")
    steps: list[Step] = pydantic.Field(default_factory=list, description="Operations, in order.")


class Defaults(_Model):
    key_serde: SerdeSpec | None = pydantic.Field(default=None, description="Default key serde.")
    value_serde: SerdeSpec | None = pydantic.Field(default=None, description="Default value serde.")


class TopologySpec(_Model):
    application_id: str | None = pydantic.Field(
        default=None,
        description="Kafka Streams' application.id: the query's name and, outside a cluster, the progress "
        "group's (streamapp.<namespace>.<applicationId>); default metadata.name. In a cluster the "
        "operator names the group after the StreamApp.",
    )
    latency: Literal["default", "low"] = pydantic.Field(
        default="default", description="'low' asks for Spark's real-time trigger where the plan allows it."
    )
    defaults: Defaults = pydantic.Field(default_factory=Defaults, description="Default serdes.")
    streams: list[StreamSpec] = pydantic.Field(min_length=1, description="The streams of the topology.")
