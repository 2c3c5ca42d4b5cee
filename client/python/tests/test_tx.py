"""TX through the real daemon: frames written in place leave as UDP datagrams, byte-exact."""
import socket
import time

import numpy as np
import pytest

import daqiri
from daqiri import abi, frames, pattern


@pytest.fixture
def udp_sink():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(5)
    yield s
    s.close()


def test_frames_leave_byte_exact(daemon, udp_sink):
    dst = udp_sink.getsockname()
    payloads = pattern.expected(np.arange(1000), 700, stream=dst[1])
    with daemon.client() as client, client.attach_tx("lo") as tx:
        assert (tx.buf_size, tx.num_bufs) == (2048, 512)
        sent = 0
        while sent < len(payloads):
            bufs = tx.reserve(min(64, len(payloads) - sent))
            for b, p in zip(bufs, payloads[sent:]):
                b.length = frames.write_udp(b.data, ("127.0.0.1", 40000), dst, p)
            while bufs:  # the TX ring may take fewer: the rest stay ours, submit them next
                n = tx.submit(bufs)
                bufs = bufs[n:]
                sent += n
        tx.flush(10.0)
        assert tx.in_flight == 0 and tx.free == 512
        got = np.array([np.frombuffer(udp_sink.recv(2048), np.uint8) for _ in range(1000)])
        assert (pattern.check(got, stream=dst[1]) == np.arange(1000)).all()
        st = [a for a in client.stats().attachments if a.id == tx.id][0]
        assert (st.packets, st.send_errors) == (1000, 0)


def _submit_to_a_sleeping_poller(client, tx, dst, until, most):
    """Submits one frame (pattern payload, sequence 0, 1, ...) each time the daemon's TX poller
    has asked for a kick (NEED_WAKEUP on the TX ring, set before it sleeps), until `until(kicks)`
    or `most` frames; returns how many went and the attachment's kicks."""
    def kicks():
        return [a for a in client.stats().attachments if a.id == tx.id][0].kicks

    sent = 0
    while not until(kicks()) and sent < most:
        deadline = time.monotonic() + 10
        while not tx._ring.words[abi.WORD_CONSUMER_FLAGS] & abi.RING_NEED_WAKEUP:
            assert time.monotonic() < deadline, "the idle daemon never asked for a kick"
            time.sleep(0.0001)
        b = tx.reserve(1)[0]
        payload = pattern.expected(np.arange(sent, sent + 1), 100, stream=dst[1])[0]
        b.length = frames.write_udp(b.data, ("127.0.0.1", 40003), dst, payload)
        assert tx.submit([b]) == 1
        sent += 1
        tx.flush(10.0)
    return sent, kicks()


@pytest.mark.parametrize("kick", [True, False])
def test_a_submit_wakes_the_sleeping_poller_unless_told_not_to(daemon, udp_sink, kick):
    """A submit that finds the flag writes the kick eventfd, and the daemon counts the kick;
    with kick=False it never does, and the frames still leave, a park later."""
    dst = udp_sink.getsockname()
    with daemon.client() as client, client.attach_tx("lo", kick=kick) as tx:
        sent, kicks = _submit_to_a_sleeping_poller(client, tx, dst, lambda k: k > 0, 50 if kick else 3)
        assert (kicks >= 1) if kick else (kicks == 0 and sent == 3), f"{sent} frames, {kicks} kicks"
        got = np.array([np.frombuffer(udp_sink.recv(2048), np.uint8) for _ in range(sent)])
        assert (pattern.check(got, stream=dst[1]) == np.arange(sent)).all()


def test_send_copies_frames(daemon, udp_sink):
    dst = udp_sink.getsockname()
    msgs = [frames.udp_headers(("127.0.0.1", 40001), dst, 5) + b"hello" for _ in range(3)]
    with daemon.client() as client, client.attach_tx("lo") as tx:
        assert tx.send(msgs) == 3
        tx.flush()
        assert [udp_sink.recv(100) for _ in range(3)] == [b"hello"] * 3


def test_buffers_not_held_are_refused_before_the_daemon_sees_them(daemon):
    with daemon.client() as client, client.attach_tx("lo") as tx:
        b = tx.reserve(1)[0]
        b.length = frames.write_udp(b.data, ("127.0.0.1", 40002), ("127.0.0.1", 9), b"x" * 18)
        tx.submit([b])
        with pytest.raises(ValueError):
            tx.submit([b])  # the daemon has it now
        forged = daqiri.TxBuffer(100000, b.data)
        forged.length = 60
        with pytest.raises(ValueError):
            tx.submit([forged])
        tx.flush()
        assert client.connected


def test_an_rdma_operation_on_a_socket_queue_cuts_the_client(daemon):
    with daemon.client() as client, client.attach_tx("lo") as tx:
        b = tx.reserve(1)[0]
        b.length = frames.write_udp(b.data, ("127.0.0.1", 40003), ("127.0.0.1", 9), b"x" * 18)
        b.op = daqiri.abi.RDMA_WRITE  # only RDMA queues take operations
        b.remote_slot = 3
        tx.submit([b])
        deadline = time.monotonic() + 5
        while not tx.detached and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tx.detached
        assert tx.failed == 0


def test_the_queue_comes_from_the_environment_when_none_is_given(daemon, udp_sink, monkeypatch):
    # A container given a TX queue through CDI has DAQIRI_TX_INTERFACE and DAQIRI_TX_QUEUE.
    monkeypatch.setenv("DAQIRI_TX_INTERFACE", "lo")
    monkeypatch.setenv("DAQIRI_TX_QUEUE", "tx0")
    dst = udp_sink.getsockname()
    payload = pattern.expected(np.arange(1), 100, stream=dst[1])[0]
    with daemon.client() as client, client.attach_tx() as tx:
        bufs = tx.reserve(1)
        bufs[0].length = frames.write_udp(bufs[0].data, ("127.0.0.1", 40000), dst, payload)
        assert tx.submit(bufs) == 1
        tx.flush(10.0)
        got = np.frombuffer(udp_sink.recv(2048), np.uint8)
        assert got.tobytes() == np.asarray(payload, np.uint8).tobytes()
    monkeypatch.setenv("DAQIRI_TX_QUEUE", "nosuch")
    with daemon.client() as client, pytest.raises(daqiri.NotFound):
        client.attach_tx()
