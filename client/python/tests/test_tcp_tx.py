"""TCP TX through the real daemon: a client answers each chunk a TCP flow delivers on the
connection it came from (tx_policy: tcp), and each peer reads back exactly its own bytes."""
import socket
import time

import pytest
from conftest import HOST_CONFIG

# The host config with its TX queue writing to TCP connections, and a TCP flow to write to.
TCP_CONFIG = HOST_CONFIG.replace(
    "{{name: tx0, batch_size: 64, ring_size: 256, regions: [tx_host]}}",
    "{{name: tcp0, tx_policy: tcp, batch_size: 64, ring_size: 256, regions: [tx_host]}}") + \
    "  - {{name: tcp_in, interface: lo, queue: rx0, match: {{tcp_dst: 4460}}, allow_block: true}}\n"
assert "tx_policy: tcp" in TCP_CONFIG


def read_exactly(s, n):
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def test_each_chunk_goes_back_on_its_own_connection(start_daemon):
    daemon = start_daemon(TCP_CONFIG)
    peers = [socket.create_connection(("127.0.0.1", 4460), timeout=5) for _ in range(2)]
    sent = {0: b"", 1: b""}
    with daemon.client() as client, client.attach_rx("tcp_in", block=True) as rx, \
            client.attach_tx("lo") as tx:
        for i in range(50):
            for k, p in enumerate(peers):
                m = f"peer {k} message {i};".encode()
                p.sendall(m)
                sent[k] += m
        echoed = 0
        total = len(sent[0]) + len(sent[1])
        deadline = time.monotonic() + 10
        while echoed < total and time.monotonic() < deadline:
            burst = rx.wait_burst(0.2)
            if not burst:
                continue
            for p in burst:
                bufs = []
                while not bufs:
                    bufs = tx.reserve(1)
                b = bufs[0]
                b.data[:len(p.payload)] = p.payload
                b.length = len(p.payload)
                b.connection = p.stream  # the connection the bytes came on
                while tx.submit([b]) == 0:
                    pass
                echoed += len(p.payload)
            rx.release(burst)
        tx.flush()
        assert echoed == total
        assert tx.failed == 0
        # A connection that is not open: the buffer comes back failed, nothing is cut.
        b = tx.reserve(1)[0]
        b.length = 4
        b.connection = 77
        tx.submit([b])
        tx.flush()
        assert tx.failed == 1
        assert not tx.detached
    for k, p in enumerate(peers):
        assert read_exactly(p, len(sent[k])) == sent[k]
        p.close()


def test_a_descriptor_with_an_rdma_operation_cuts_a_tcp_client(start_daemon):
    daemon = start_daemon(TCP_CONFIG)
    with daemon.client() as client, client.attach_tx("lo") as tx:
        b = tx.reserve(1)[0]
        b.length = 4
        b.op = 1  # abi.RDMA_WRITE: a TCP queue takes a connection and nothing else
        tx.submit([b])
        deadline = time.monotonic() + 5
        while not tx.detached and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tx.detached


if __name__ == "__main__":
    pytest.main([__file__])
