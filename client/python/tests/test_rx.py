"""RX through the real daemon: exact counts, bytes and contents of daqiri-gen's packets."""
import os
import socket
import struct

import numpy as np
import pytest

import daqiri
from daqiri import abi
from conftest import (assert_sequences, expected_samples, finish, gen, receive, send_samples, stream,
                      wait_for, REORDER_CONFIG)


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
def test_every_packet_arrives_exactly_once_in_order(daemon, compact):
    with daemon.client() as client, client.attach_rx("stream0", block=True, compact=compact) as rx:
        rows, flows = stream(rx, 4096, 3000, 1000)
        assert rows.shape == (3000, 1000)
        assert_sequences(rows, 4096, 3000)
        flow_id = {f.name: f.id for f in client.flows()}["stream0"]
        assert (flows == flow_id).all()
        assert rx.next_burst().__len__() == 0
        st = client.flow_stats("stream0")
        assert (st.packets, st.bytes, st.buffers_on_loan) == (3000, 3000 * 1042, 0)


def test_the_flow_comes_from_the_environment_when_none_is_given(daemon, monkeypatch):
    # A container given a flow through CDI has DAQIRI_FLOW; a flow or queue given wins.
    monkeypatch.setenv("DAQIRI_FLOW", "stream1")
    with daemon.client() as client, client.attach_rx(block=True) as rx:
        rows, _ = stream(rx, 4097, 300, 100)
        assert_sequences(rows, 4097, 300)
        assert client.flow_stats("stream1").attachments == 1
    monkeypatch.delenv("DAQIRI_FLOW")
    with daemon.client() as client, pytest.raises(daqiri.InvalidArgument):
        client.attach_rx()


def test_views_are_zero_copy_and_read_only(daemon):
    with daemon.client() as client, client.attach_rx("stream0", block=True) as rx:
        gen(4096, 64, 200)
        b = rx.wait_burst(5.0)
        p = b[0]
        assert p.frame.base is not None and not p.frame.flags.writeable
        with pytest.raises(ValueError):
            p.payload[0] = 1
        assert len(p.frame) == 242 and len(p.payload) == 200
        assert p.flags & daqiri.abi.DESC_HEADERS_SYNTHESIZED
        assert bytes(p.frame[42:]) == bytes(p.payload)
        src, dst, payload = daqiri.frames.parse_udp(p.frame)
        assert dst == ("127.0.0.1", 4096) and bytes(payload) == bytes(p.payload)
        m = b.payloads()
        assert not m.flags.writeable and not m.flags.owndata
        assert (b.lengths == 242).all() and (b.payload_offsets == 42).all()
        assert (b.timestamps_ns > 0).all()
        rx.release(b)
        rx.release(b)  # again: nothing more to give back
        with client.attach_rx("stream1", block=True) as other, pytest.raises(ValueError):
            other.release(b)


def test_two_flows_each_only_its_own(daemon):
    with daemon.client("a") as a, daemon.client("b") as b, \
            a.attach_rx("stream0", block=True) as rx0, b.attach_rx("stream1", block=True) as rx1:
        other = gen(4097, 1500, 300, rate=100000, wait=False)
        got0, _ = stream(rx0, 4096, 2000, 500)
        finish(other)
        got1, _ = receive(rx1, 1500)
        assert_sequences(got0, 4096, 2000)
        assert_sequences(got1, 4097, 1500)
        assert rx0.wait_burst(0.2).__len__() == 0 and rx1.wait_burst(0.2).__len__() == 0


def test_mixed_sizes_index_one_by_one(daemon):
    with daemon.client() as client, client.attach_rx("stream0", block=True) as rx:
        gen(4096, 10, 100)
        gen(4096, 10, 300)
        sizes = []
        while len(sizes) < 20:
            b = rx.wait_burst(5.0)
            assert b, "packets missing"
            if len(set(b.lengths.tolist())) > 1:
                with pytest.raises(ValueError):
                    b.payloads()
            sizes += [len(p.payload) for p in b]
            rx.release(b)
        assert sizes == [100] * 10 + [300] * 10


def test_a_held_burst_holds_buffers_until_released(daemon):
    with daemon.client() as client, client.attach_rx("stream0", ring_size=64) as rx:
        gen(4096, 100, 64)
        held = []
        while sum(map(len, held)) < 64:
            held.append(rx.wait_burst(5.0))
        # The daemon may still be taking the rest off the socket (slowly, under a sanitizer).
        assert wait_for(lambda: client.flow_stats("stream0").packets == 100)
        st = client.flow_stats("stream0")
        assert st.buffers_on_loan == 64 and st.dropped_rings_full == 36
        rx.release(held[-1])  # releases every earlier burst too
        assert wait_for(lambda: client.flow_stats("stream0").buffers_on_loan == 0)


def test_a_release_the_stalled_flow_waits_for_kicks_its_poller(daemon):
    """With block backpressure a full ring holds the flow back, and its poller sleeps asking for
    a kick (NEED_KICK on the ring); a release that finds the flag writes the kick eventfd, the
    daemon counts it, and every packet arrives, in order."""
    with daemon.client() as client, client.attach_rx("stream0", block=True) as rx:
        def kicks():
            return [a for a in client.stats().attachments if a.id == rx.id][0].kicks

        def asked():
            return rx._ring.words[abi.WORD_PRODUCER_FLAGS] & abi.RING_NEED_KICK

        p = gen(4096, 3000, 64, rate=50000, wait=False)
        rows = []
        try:
            assert wait_for(asked, 20.0), "the stalled flow never asked for a kick"
            # One packet at a time, so that the flow stays stalled, until a release kicked.
            while kicks() == 0:
                assert wait_for(asked, 10.0), "no kick request to answer"
                b = rx.next_burst(1)
                assert len(b) == 1
                rows.append(b.payloads(copy=True))
                rx.release(b)
            rest, _ = receive(rx, 3000 - len(rows), timeout=20.0)
        finally:
            finish(p)
        assert_sequences(np.concatenate(rows + [rest]), 4096, 3000)
        assert client.flow_stats("stream0").packets == 3000


def test_deleting_the_flow_detaches_the_stream(daemon):
    with daemon.client() as client:
        client.create_flow("short", "lo", "rx0", udp_dst=4100)
        rx = client.attach_rx("short")
        gen(4100, 5, 64)
        assert sum(len(b) for b in rx.bursts(timeout=1.0)) == 5
        client.delete_flow("short")
        with pytest.raises(daqiri.Detached):
            rx.wait_burst(5.0)
        assert rx.detached and client.connected
        assert list(rx.bursts()) == []
        rx.close()


def test_reconnect_after_a_daemon_restart(start_daemon):
    d = start_daemon()
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(5)
    with sink, d.client("survivor") as client:
        rx = client.attach_rx("stream0", block=True)
        tx = client.attach_tx("lo")
        assert_sequences(stream(rx, 4096, 100, 64)[0], 4096, 100)
        assert d.stop() == 0
        with pytest.raises(daqiri.Detached):
            rx.wait_burst(5.0)
        assert rx.detached and tx.detached and not client.connected
        with pytest.raises(daqiri.Unavailable):
            client.reconnect()  # no daemon yet: the channel has seen it gone
        start_daemon()  # the same socket path
        client.reconnect()
        assert client.connected and not rx.detached and not tx.detached
        assert [s.id for s in client.sessions()] == [client.session_id]
        assert_sequences(stream(rx, 4096, 200, 64)[0], 4096, 200)
        frame = daqiri.frames.udp_headers(("127.0.0.1", 40003), sink.getsockname(), 2) + b"ok"
        assert tx.send([frame]) == 1
        tx.flush()
        assert sink.recv(16) == b"ok"


# net_pcap replays a file of mixed frames to a catch-all alone on its queue: the daemon leaves
# them unread (abi.PAYLOAD_UNREAD) and the client finds each payload. Compact descriptors carry
# no payload offset at all: there too the client finds every one.
PCAP_CONFIG = """daemon:
  socket: {socket}
  metrics: "off"
{daemon_extra}dpdk: {{hugepages: false, memory_mb: 256, eal_args: [EAL]}}
memory_regions:
  - {{name: rx, kind: host, buf_size: 2048, num_bufs: 2048}}
interfaces:
  - name: pcap0
    backend: dpdk
    address: "net_pcap0,rx_pcap=PCAP"
    rx: {{queues: [{{name: rx0, regions: [rx]}}]}}
flows:
  - {{name: all, interface: pcap0, match: {{any: true}}, allow_block: true}}
"""


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
def test_payloads_of_frames_the_daemon_did_not_read(start_daemon, workdir, compact):
    if os.geteuid() != 0:
        pytest.skip("DPDK's EAL needs root")
    udp = daqiri.frames.udp_headers(("10.1.0.1", 1000), ("10.1.0.2", 7000), 100) + bytes(range(100))
    tagged = udp[:12] + b"\x81\x00\x00\x05" + udp[12:]
    tcp = udp[:23] + b"\x06" + udp[24:]
    frames = [(udp, 42), (tagged, 46), (tcp, 0), (udp[:40], 0)] * 3
    pcap = os.path.join(workdir, "mixed.pcap")
    with open(pcap, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, (frame, _) in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(frame), len(frame)) + frame)
    # A host without Debian's DPDK (a gpu-check bundle) names its drivers' folder.
    pmds = os.environ.get("DAQIRI_PMD_DIR")
    eal = ", ".join(f"-d, {os.path.join(pmds, f)}" for f in sorted(os.listdir(pmds))) if pmds else ""
    d = start_daemon(PCAP_CONFIG.replace("PCAP", pcap).replace("EAL", eal))
    with d.client() as client, client.attach_rx("all", block=True, compact=compact) as rx:
        got = []
        while len(got) < len(frames):
            b = rx.wait_burst(5.0)
            assert len(b) > 0, "the replay stopped short"
            if compact:
                assert b.desc.dtype == abi.RX_DESC_COMPACT
                assert (b.timestamps_ns == 0).all()
            else:
                assert (b.desc["payload_offset"] == abi.PAYLOAD_UNREAD).all()
                assert (b.timestamps_ns > 0).all()
            assert (b.flow_ids == 0).all()
            got += [(bytes(p.frame), bytes(p.payload), int(at)) for p, at in zip(b, b.payload_offsets)]
            rx.release(b)
    for (frame, at), (got_frame, payload, got_at) in zip(frames, got):
        assert got_frame == frame
        assert got_at == at
        assert payload == (frame[at:] if at else b"")



def test_a_reorders_batches_are_arrays_in_sequence_order(start_daemon):
    d = start_daemon(REORDER_CONFIG)
    with d.client() as client, client.attach_rx("beams") as rx:
        send_samples()
        got = []
        while len(got) < 2:
            b = rx.wait_burst(5.0)
            assert len(b) > 0, "no batch came"
            got += [batch._replace(data=batch.data.copy()) for batch in map(daqiri.batch_of, b)]
            rx.release(b)
    first, second = got[0], got[1]
    assert (first.batch_id, first.packets, first.missing, first.timed_out) == (0, 4, 0, False)
    assert (second.batch_id, second.packets, second.missing) == (1, 3, 1)
    assert first.slot_bytes == 6 * 4
    assert (first.slots(np.float32) == expected_samples(0)).all()
    assert (second.slots(np.float32) == expected_samples(1)).all()
    assert daqiri.batch_of(daqiri.Packet(np.zeros(80, np.uint8), np.zeros(0, np.uint8), 0, 0, 0, 0)) is None
