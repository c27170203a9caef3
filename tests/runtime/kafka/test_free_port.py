"""Ports for the embedded broker and the e2e components: free now, outside the kernel's ephemeral
range (which outgoing connections draw their local ports from), and never handed out twice, by
this process or another one on the machine (parallel test workers)."""

from __future__ import annotations

import socket
import subprocess
import sys

from streamapp.runtime.embedded import broker


def test_free_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = broker._ephemeral_range()
    ports = [broker.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(not low <= p <= high for p in ports), (low, high, ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free indeed


def test_a_port_another_process_handed_out_is_not_handed_out_here_while_it_lives() -> None:
    script = (
        "import sys; from streamapp.runtime.embedded import broker; "
        "print(broker.free_port(), flush=True); sys.stdin.read()"  # lives until its stdin closes
    )
    other = subprocess.Popen(
        [sys.executable, "-P", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert other.stdout is not None and other.stdin is not None
    try:
        port = int(other.stdout.readline())
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # nothing listens there yet: only the claim says it is taken
        assert not broker._claim(port)
    finally:
        other.stdin.close()
        assert other.wait(timeout=60) == 0
    assert broker._claim(port), "the claim ends with the process that made it"
