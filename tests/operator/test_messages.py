"""What the operator says stays within what the API server takes and a reader can use: Event
messages of at most 1024 bytes (the API server counts bytes, kopf cuts characters), and a driver's
termination message reduced to one line in the status."""

from __future__ import annotations

from streamapp.operator import handlers, reconcile


def test_an_event_message_is_cut_to_1024_bytes_of_utf8() -> None:
    assert handlers.event_message("short → fine") == "short → fine"
    long = "running 'wc' a → b; " * 200  # 4,200 bytes, multibyte arrows
    cut = handlers.event_message(long)
    assert len(cut.encode()) <= 1024 and cut.endswith("…") and long.startswith(cut[:-1])


def test_a_crashed_drivers_log_tail_becomes_one_line_in_the_status() -> None:
    tail = "killed by SIGKILL\n" + "\n".join(f"22:26:{i:02d} INFO line {i}" for i in range(80))
    pod = {
        "metadata": {"name": "wc-driver", "labels": {}},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"state": {"terminated": {"reason": "Error", "exitCode": 137, "message": tail}}}
            ],
        },
    }
    seen = reconcile.observe_driver(pod)
    assert seen is not None
    assert (
        seen.message
        == "driver container ended: Error (exit code 137) killed by SIGKILL … 22:26:79 INFO line 79"
    )
