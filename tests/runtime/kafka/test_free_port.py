"""Ports for the embedded broker and the e2e components: free now, outside the kernel's ephemeral
range (which outgoing connections draw their local ports from), and never handed out twice."""

from __future__ import annotations

import socket

from streamapp.runtime.embedded import broker


def test_free_ports_are_outside_the_ephemeral_range_distinct_and_bindable() -> None:
    low, high = broker._ephemeral_range()
    ports = [broker.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(not low <= p <= high for p in ports), (low, high, ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free indeed
