"""KTables, aggregations and windows on Spark, with Kafka Streams' semantics.

Why a package of its own: Spark's built-in streaming aggregations differ from Kafka Streams where
it matters — lateness is decided per micro-batch by the watermark (so results depend on batch
boundaries), session windows refuse update mode, aggregators cannot be Python functions with
subtractors. Here every stateful step is a pure-Python fold (:mod:`.aggregation`,
:mod:`.windows`) run over Spark state by :mod:`.engine`; :mod:`.ops` holds what the compiler
calls for each DSL operation. Windows of every kind with a declarative aggregator run the same
semantics on the JVM instead (``runtime/jvm``: ``TimeWindowAggregation.java``,
``SlidingWindowAggregation.java``, ``SessionWindowAggregation.java``), with state per key and
window rather than a task's windows in one value
(:func:`streamapp.runtime.topology.state.windows_on_jvm` decides).

**Windowed keys on Kafka**: a windowed result's key is the struct ``<key, start, end>`` in the
plan; written to Kafka with a string key serde it is the text ``<key>@<start>/<end>`` where start
and end are epoch milliseconds (start inclusive; end exclusive for tumbling/hopping windows,
inclusive for sliding and session windows, as in Kafka Streams) — e.g.
``kafka@1700000000000/1700000060000`` — see :func:`.ops.windowed_key_text`; with a JSON key
serde it is ``{"key": ..., "start": ..., "end": ...}``.

Importing this package imports nothing from Spark; import the submodules.
"""
