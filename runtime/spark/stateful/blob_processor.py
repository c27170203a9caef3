"""The stateful processor of every Python-engine step (:func:`.engine.run`), in a module of its own.

On a query's first micro-batch Spark runs ``init()`` of every ``transformWithStateInPandas``
operator on the driver, each in a new Python process (the pre-init runner: it learns the state
variables' schemas), and that process imports whatever unpickling the processor imports. So this
module imports pyspark's ``StatefulProcessor`` and nothing of the engine: the step travels pickled
inside the processor and is unpickled where rows arrive (an executor's Python worker, which keeps
its imports from task to task). Importing the engine with pandas took a pre-init process 0.9 s of
its 1.1 s here, and a query starts one per operator: a 6-topology app of the randomized suite
started 15 on its first micro-batch.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyspark import cloudpickle
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BlobProcessor"]


class BlobProcessor(StatefulProcessor):  # type: ignore[misc]  # pyspark is typed as Any here
    """Keeps one pickled state value per group and hands every batch of the group to ``step``
    (``(group key, batch as pandas, state) -> (state, rows)``: :data:`.engine.Step`)."""

    def __init__(self, step: Callable[[Any, pd.DataFrame, Any], tuple[Any, pd.DataFrame]]) -> None:
        self._pickled_step = cloudpickle.dumps(step)
        self._step: Callable[[Any, pd.DataFrame, Any], tuple[Any, pd.DataFrame]] | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._value = handle.getValueState("state", "blob binary")

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
    ) -> Iterator[pd.DataFrame]:
        import pandas as pd  # noqa: PLC0415 - an executor's worker has it; the pre-init runner never needs it

        if self._step is None:
            self._step = pickle.loads(self._pickled_step)
        state = pickle.loads(self._value.get()[0]) if self._value.exists() else None
        frames = [f for f in rows if len(f)]
        if not frames:
            return
        batch = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
        state, out = self._step(key[0] if len(key) == 1 else key, batch, state)
        self._value.update((pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL),))
        if len(out):
            yield out

    def close(self) -> None:
        pass
