"""Custom processors on Spark: one ``transformWithStateInPandas`` grouped by task.

Records are grouped by *task* (the input partition when the records still sit where Kafka put
them, else the key's partition of Kafka Streams' repartition topic: ``engine.hash_task``), and each
task runs :func:`.process_logic.run_round` over its micro-batch in Kafka Streams' order, with its
state in one pickled value (as :mod:`.engine` keeps an aggregation's).

Time mode ``EventTime``, for one reason: Spark then runs a micro-batch without new input (a
no-data batch) right after any batch that moved its watermark, so timers due at the end of a
batch fire although the input paused. The watermark is put on the record timestamp with no delay,
and the processor reads a copy of the timestamp (``ts``) that carries no watermark, so Spark drops
no record as late: lateness, stream time and timers stay the task's own (see
:mod:`streamapp.runtime.processor`). A task that has something due registers a Spark timer just
above the current watermark; Spark calls it back (``handleExpiredTimer``) in the next batch whose
watermark reached it, and the due timers fire then.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamapp.runtime import processor as api
from streamapp.runtime.spark.frames import RecordFrame
from streamapp.runtime.spark.stateful import engine, process_logic

__all__ = ["process"]

_COLUMNS = ["key", "value", "ts"]


class _TaskProcessor(StatefulProcessor):  # type: ignore[misc]  # pyspark is typed as Any here
    """Runs one user processor instance for every task of a Spark partition, one at a time."""

    def __init__(self, processor_class: type[api.Processor]) -> None:
        self._class = processor_class

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._blob = handle.getValueState("state", "blob binary")
        self._processor = self._class()
        self._context = process_logic.Context()
        self._processor.init(self._context)
        self._context.in_init = False

    def _load(self) -> None:
        exists = self._blob.exists()
        self._context.state = pickle.loads(self._blob.get()[0]) if exists else process_logic.new_state()

    def _save(self, timer_values: Any, expired: int | None = None) -> None:
        context = self._context
        self._blob.update((pickle.dumps(context.state, protocol=pickle.HIGHEST_PROTOCOL),))
        for registered in list(self._handle.listTimers()):
            if registered != expired:  # Spark deletes the timer it is calling back itself
                self._handle.deleteTimer(registered)
        if process_logic.needs_wake_up(context):
            # Above this batch's watermark (so not fired in this batch), at most the stream time
            # reached when the task is not behind: the next batch's watermark reaches it.
            watermark = int(timer_values.getCurrentWatermarkInMs())
            self._handle.registerTimer(max(context.state["t"] or 0, watermark + 1))

    @staticmethod
    def _frame(out: list[tuple[Any, Any, int]]) -> pd.DataFrame:
        return pd.DataFrame(out, columns=_COLUMNS)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        self._load()
        records: list[api.Record] = []
        if frames:
            batch = (
                pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
            )
            batch = engine.arrival_order(batch)
            records = [
                api.Record(k, v, ts, p, o)
                for k, v, ts, p, o in zip(
                    engine.pylist(batch["key"]), engine.pylist(batch["value"]), batch["ts"].tolist(),
                    batch["partition"].tolist(), batch["offset"].tolist(), strict=True,
                )
            ]  # fmt: skip
        now = int(timerValues.getCurrentProcessingTimeInMs())
        out = process_logic.run_round(self._processor, self._context, records, now)
        self._save(timerValues)
        if out:
            yield self._frame(out)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
        self._load()
        now = int(timerValues.getCurrentProcessingTimeInMs())
        out = process_logic.fire_timers(self._processor, self._context, now)
        self._save(timerValues, expired=int(expiredTimerInfo.getExpiryTimeInMs()))
        if out:
            yield self._frame(out)

    def close(self) -> None:
        pass


def process(
    frame: RecordFrame, processor_class: type[api.Processor], *, task: Column, value_type: str
) -> RecordFrame:
    """The processor's output records (key type kept, values of ``value_type``)."""
    key_type = frame.df.schema["key"].dataType.simpleString()
    watermarked = RecordFrame(frame.df.withWatermark("timestamp", "0 seconds"))
    rows = engine.input_rows(watermarked).withColumn("task", task)
    out = (
        engine.with_task_key(rows, "task")
        .groupBy(engine.TASK_KEY)
        .transformWithStateInPandas(
            statefulProcessor=_TaskProcessor(processor_class),
            outputStructType=f"key {key_type}, value {value_type}, ts bigint",
            outputMode="append",
            timeMode="EventTime",
        )
    )
    return engine.as_record_frame(out)
