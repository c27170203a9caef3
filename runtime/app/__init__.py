"""The one way to run a topology: ``StreamApp(topology_or_manifest, config).start()``.

Kafka Streams runs a topology with ``new KafkaStreams(topology, props).start()``; this is the
same for StreamApp. ``streamapp run``, the in-cluster driver, the demo, the benchmarks and the
tests all go through :class:`StreamApp` rather than wiring session, checkpoint, source and sink
themselves (those live once, in :mod:`streamapp.runtime.spark.execution`, imported only when an
app starts: importing this package never imports pyspark).

Life cycle, with Kafka Streams' state names::

    CREATED ──start()──► STARTING ──► RUNNING ──stop()──► PENDING_SHUTDOWN ──► NOT_RUNNING
                            │  (the input drained, with ``drain``)  ──────────► NOT_RUNNING
                            └──── the query failed ─────────────────────────► ERROR

:meth:`StreamApp.stop` is the only place that stops the query. A monitor thread follows the
query: after every micro-batch it updates :attr:`StreamApp.progress` (records read and written
per topic, batches, late and skipped records), commits the batch's end offsets to the app's
consumer group (:mod:`streamapp.runtime.kafka.progress`), and calls the progress callbacks.
Spark's own ``StreamingQueryListener`` objects (metrics exporters) are attached with
:meth:`StreamApp.add_query_listener`. In a cluster the app holds the driver's Lease and hands
its query over to the next driver (:mod:`.handover`); :meth:`StreamApp.run_until_stopped` is
what ``streamapp run`` and ``streamapp driver`` block in.

The modules, top to bottom: :mod:`.runner` (:class:`StreamApp`, the life cycle), :mod:`.handover`
(the Lease), :mod:`.monitor` (following the query, :class:`Progress`), :mod:`.config`
(:class:`StreamsConfig`, :class:`State`).
"""

from __future__ import annotations

from streamapp.runtime.app.config import State, StreamsConfig
from streamapp.runtime.app.monitor import Progress
from streamapp.runtime.app.runner import StreamApp

__all__ = ["Progress", "State", "StreamApp", "StreamsConfig"]
