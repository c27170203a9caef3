"""The StreamApp manifest schema (pydantic v2): what users write under ``spec``.

camelCase in YAML (Kubernetes' convention), snake_case in Python; unknown fields are errors, and
every field is described so that the CRD generated from these models documents itself.

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
from streamapp.runtime.manifest.deployment import Deployment

__all__ = [
    "FromSpec",
    "KafkaSpec",
    "LogicSpec",
    "MapSpec",
    "Metadata",
    "SerdeSpec",
    "SplitSpec",
    "Step",
    "StreamApp",
    "StreamAppSpec",
    "StreamSpec",
    "ToSpec",
    "TopologySpec",
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
        default=None, ge=1, description="Partition count after the shuffle."
    )


class ToSpec(_Model):
    topic: str = pydantic.Field(description="Output topic.")
    key_serde: SerdeSpec | None = pydantic.Field(
        default=None, description="Key serde (default: topology defaults)."
    )
    value_serde: SerdeSpec | None = pydantic.Field(
        default=None, description="Value serde (default: topology defaults)."
    )


class PrintSpec(_Model):
    label: str | None = pydantic.Field(default=None, description="Prefix printed before each record.")


class Empty(_Model):
    """An operation without parameters: ``{}``."""


class AggregateSpec(_Model):
    fn: Literal["sum", "min", "max", "avg", "latest", "collect_list"] = pydantic.Field(
        description="Aggregate function; latest keeps the value with the highest timestamp."
    )
    expr: str = pydantic.Field(
        default="value", description="What is aggregated (an expression over the record)."
    )


class Step(_Model):
    """Exactly one operation."""

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
    repartition: RepartitionSpec | None = pydantic.Field(default=None, description="Shuffle by key.")
    split: SplitSpec | None = pydantic.Field(default=None, description="Named branches; ends this stream.")
    to: ToSpec | str | None = pydantic.Field(default=None, description="Write to a topic; ends this stream.")
    print: PrintSpec | None = pydantic.Field(default=None, description="Print records; ends this stream.")
    group_by: LogicSpec | None = pydantic.Field(
        default=None, description="Group by a new key (then count/aggregate)."
    )
    group_by_key: Empty | None = pydantic.Field(default=None, description="Group by the current key.")
    count: Empty | None = pydantic.Field(default=None, description="Records per key, as a table.")
    aggregate: AggregateSpec | None = pydantic.Field(
        default=None, description="A declarative aggregate per key."
    )
    to_stream: Empty | None = pydantic.Field(default=None, description="The table's updates as a stream.")

    @pydantic.model_validator(mode="after")
    def _one_operation(self) -> Step:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"a step has exactly one operation, found {len(given)}")
        return self

    def operation(self) -> tuple[str, Any]:
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if value is not None:
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


class StreamSpec(_Model):
    name: str | None = pydantic.Field(default=None, description="Name other streams refer to.")
    from_: FromSpec = pydantic.Field(alias="from", description="Where the stream's records come from.")
    steps: list[Step] = pydantic.Field(default_factory=list, description="Operations, in order.")


class Defaults(_Model):
    key_serde: SerdeSpec | None = pydantic.Field(default=None, description="Default key serde.")
    value_serde: SerdeSpec | None = pydantic.Field(default=None, description="Default value serde.")


class TopologySpec(_Model):
    application_id: str | None = pydantic.Field(default=None, description="Kafka Streams' application.id.")
    latency: Literal["default", "low"] = pydantic.Field(
        default="default", description="'low' asks for Spark's real-time trigger where the plan allows it."
    )
    defaults: Defaults = pydantic.Field(default_factory=Defaults, description="Default serdes.")
    streams: list[StreamSpec] = pydantic.Field(min_length=1, description="The streams of the topology.")


class KafkaSpec(_Model):
    bootstrap_servers: str | None = pydantic.Field(
        default=None, description="host:port[,host:port]; omitted locally: an embedded broker is started."
    )


class StreamAppSpec(_Model):
    kafka: KafkaSpec | None = pydantic.Field(default=None, description="Kafka connection.")
    topology: TopologySpec = pydantic.Field(description="The processing topology.")
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = pydantic.Field(
        default="at_least_once", description="Delivery guarantee Kafka to Kafka."
    )
    checkpoint_location: str | None = pydantic.Field(default=None, description="Checkpoint folder or URI.")
    spark_conf: dict[str, str] | None = pydantic.Field(default=None, description="Extra Spark configuration.")
    deployment: Deployment | None = pydantic.Field(default=None, description="How the operator runs the app.")


class Metadata(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    name: str = pydantic.Field(description="The app's name.")
    namespace: str | None = None


class StreamApp(_Model):
    api_version: Literal["streamapp.io/v1alpha1"] = pydantic.Field(description="streamapp.io/v1alpha1")
    kind: Literal["StreamApp"] = pydantic.Field(description="StreamApp")
    metadata: Metadata
    spec: StreamAppSpec
    status: dict[str, Any] | None = None
