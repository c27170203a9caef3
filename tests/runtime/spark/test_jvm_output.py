"""The JVM's stderr reaches the user without the Python workers' per-query debugging lines."""

from __future__ import annotations

import os

from streamapp.runtime.spark import jvm_output


def test_forward_drops_worker_noise_and_keeps_everything_else() -> None:
    read_fd, write_fd = os.pipe()
    os.write(
        write_fd,
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
        b"Streaming TransformWithStateInPandas Python worker Completed execution of UDF: <f>.\n\n"
        b"12:00:00.000 ERROR Executor: a real problem\n\nlast line without newline",
    )
    os.close(write_fd)
    out_r, out_w = os.pipe()
    jvm_output._forward(read_fd, out_w)
    os.close(out_w)
    with os.fdopen(out_r, "rb") as out:
        assert out.read() == b"12:00:00.000 ERROR Executor: a real problem\n\nlast line without newline"
