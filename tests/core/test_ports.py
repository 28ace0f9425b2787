"""Free ports for the servers the app starts: distinct, and free to bind at once."""

import socket

from core.ports import free_ports


def test_free_ports_are_distinct_and_can_be_bound_on_every_interface():
    ports = free_ports(3)
    assert len(set(ports)) == 3
    sockets = [socket.socket() for _ in ports]
    try:
        for sock, port in zip(sockets, ports, strict=True):
            sock.bind(("", port))
    finally:
        for sock in sockets:
            sock.close()
