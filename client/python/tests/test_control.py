"""Every daqiri-ctl operation as a method, and errors mapped from the daemon's status codes."""
import os

import numpy as np
import pytest

import daqiri
from conftest import gen, stream, wait_for
from daqiri import pattern
from daqiri.rx import RxStream
from daqiri.v1 import control_pb2 as pb


def test_info_names_the_daemon_and_the_caller(daemon):
    with daemon.control() as c:
        info = c.info()
        assert info.abi_version == daqiri.abi.ABI_VERSION
        assert info.session_socket.endswith(".session.sock")
        assert info.caller.uid == 0 and info.caller.role == pb.ROLE_ADMIN
        assert "socket" in info.backends
        assert c.health()


def test_lists_match_the_configuration(daemon):
    with daemon.control() as c:
        assert [(i.name, i.backend) for i in c.interfaces()] == [("lo", pb.BACKEND_SOCKET)]
        assert {r.name: (r.buf_size, r.num_bufs) for r in c.regions()} == {
            "rx_host": (2048, 4096), "tx_host": (2048, 512)}
        assert [(q.name, q.direction) for q in c.queues("lo")] == [
            ("rx0", pb.DIRECTION_RX), ("tx0", pb.DIRECTION_TX)]
        flows = c.flows()
        assert [(f.name, f.match.udp_dst.first) for f in flows] == [("stream0", 4096), ("stream1", 4097)]
        assert flows[0].id != flows[1].id


def test_create_and_delete_a_flow(daemon):
    with daemon.control() as c:
        f = c.create_flow("radio", "lo", "rx0", udp_dst=(5000, 5003), ipv4_src="127.0.0.0/8")
        assert (f.name, f.match.udp_dst.first, f.match.udp_dst.last) == ("radio", 5000, 5003)
        assert (f.match.ipv4_src.address, f.match.ipv4_src.prefix_length) == ("127.0.0.0", 8)
        assert f.origin == pb.FLOW_ORIGIN_API
        assert (f.allow_block, list(f.allow_block_users)) == (False, [])
        assert "radio" in [x.name for x in c.flows()]
        with pytest.raises(daqiri.AlreadyExists):
            c.create_flow("radio", "lo", "rx0", udp_dst=6000)
        with pytest.raises(daqiri.AlreadyExists):
            c.create_flow("other", "lo", "rx0", udp_dst=(5001, 5001))  # overlaps radio's match
        with pytest.raises(daqiri.InvalidArgument):
            c.create_flow("empty", "lo", "rx0")  # no match at all
        with pytest.raises(daqiri.NotFound):
            c.create_flow("x", "eth9", "rx0", udp_dst=7000)
        c.delete_flow("radio")
        assert "radio" not in [x.name for x in c.flows()]
        with pytest.raises(daqiri.NotFound):
            c.delete_flow("radio")


def test_a_zero_length_prefix_crosses_the_api_and_host_bits_are_refused(daemon):
    with daemon.control() as c:
        f = c.create_flow("anysrc", "lo", "rx0", udp_dst=5200, ipv4_src="0.0.0.0/0")
        assert (f.match.ipv4_src.address, f.match.ipv4_src.prefix_length) == ("0.0.0.0", 0)
        f = c.create_flow("onesrc", "lo", "rx0", udp_dst=5201, ipv4_src="127.0.0.1")
        assert (f.match.ipv4_src.address, f.match.ipv4_src.prefix_length) == ("127.0.0.1", 32)
        with pytest.raises(ValueError):
            c.create_flow("hostbits", "lo", "rx0", udp_dst=5202, ipv4_src="127.0.0.1/8")
        c.delete_flow("anysrc")
        c.delete_flow("onesrc")


def test_block_backpressure_is_the_flows_to_allow(daemon):
    with daemon.control() as c:
        c.create_flow("strict", "lo", "rx0", udp_dst=5100)
        f = c.create_flow("trusting", "lo", "rx0", udp_dst=5101, allow_block=["root", "alice"])
        assert (f.allow_block, list(f.allow_block_users)) == (False, ["root", "alice"])
    with daemon.client("blocker") as client:
        with pytest.raises(daqiri.PermissionDenied, match='flow "strict" lets no client hold'):
            client.attach_rx("strict", block=True)
        with client.attach_rx("strict") as rx:  # drop-new is anyone's
            assert not rx.detached
        if os.geteuid() == 0:
            with client.attach_rx("trusting", block=True) as rx:
                assert not rx.detached


def test_sessions_and_stats_show_a_client(daemon):
    with daemon.client("lister") as client, client.attach_rx("stream1") as rx, \
            client.attach_tx("lo") as tx:
        sessions = client.sessions()
        mine = [s for s in sessions if s.id == client.session_id]
        assert len(mine) == 1 and mine[0].name == "lister"
        # One name per attachment in sessions and stats; the TX queue resolved to the first.
        assert [(a.id, a.target) for a in mine[0].attachments] == [(rx.id, "stream1"), (tx.id, "lo/tx0")]
        st = client.stats()
        assert [a.target for a in st.attachments] == ["stream1", "lo/tx0"]
        assert client.flow_stats("stream1").attachments == 1
        assert client.flow_stats("nope") is None


def test_attach_errors_carry_the_reason(daemon):
    with daemon.client() as client:
        with pytest.raises(daqiri.NotFound, match="nope"):
            client.attach_rx("nope")
        with pytest.raises(daqiri.InvalidArgument):
            client.attach_rx("stream0", ring_size=1000)  # not a power of two
        with pytest.raises(daqiri.InvalidArgument):
            client.attach_rx()
        with pytest.raises(daqiri.NotFound):
            client.attach_tx("eth9")
        assert client.connected  # refusals cost the session nothing


def test_no_daemon_is_unavailable(workdir):
    with pytest.raises(daqiri.Unavailable):
        daqiri.Client(f"{workdir}/none.sock", timeout=1.0)


def test_daemon_capture_records_a_flow(start_daemon, workdir):
    folder = os.path.join(workdir, "captures")
    os.mkdir(folder)
    d = start_daemon(daemon_extra=f"  capture_dirs: [{folder}]\n")
    path = os.path.join(folder, "py.raw")
    with daqiri.Control(d.socket) as control:
        started = control.start_capture("stream0", path, format="raw", max_packets=500)
        assert started.running and started.flow == "stream0"
        wait_for(lambda: control.flow_stats("stream0").attachments == 1)
        gen(4096, 500, 100)
        assert wait_for(lambda: not [c for c in control.captures() if c.id == started.id][0].running)
        done = [c for c in control.captures() if c.id == started.id][0]
        assert (done.packets, done.bytes, list(done.files), done.error) == (500, 500 * 142, [path], "")
        # Raw: the payloads back to back, as daqiri-gen made them.
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), np.uint8)
        assert data.size == 500 * 100
        assert list(pattern.check(data.reshape(500, 100))) == list(range(500))
        with pytest.raises(daqiri.PermissionDenied, match="not inside the folders"):
            control.start_capture("stream0", os.path.join(workdir, "out.pcap"))
        with pytest.raises(daqiri.NotFound):
            control.stop_capture(12345)


def test_delivery_starts_at_the_claim_and_stats_say_when(daemon):
    with daemon.client("claimer") as client:
        # Attach alone, as a client between its gRPC call and its CLAIM.
        req = pb.AttachRequest(session_id=client.session_id, flow="stream0")
        resp = client._call("Attach", req)
        [a] = client.stats().attachments
        assert (a.id, a.claimed) == (resp.attachment_id, False)
        gen(4096, 7, 100)
        assert wait_for(lambda: client.flow_stats("stream0").dropped_no_attachment == 7)
        attached = client._session.claim(resp.attachment_id, resp.token)
        with client._keep(RxStream(client, attached, req)) as rx:
            assert [(a.id, a.claimed) for a in client.stats().attachments] == [(resp.attachment_id, True)]
            rows, _ = stream(rx, 4096, 5, 100)
            assert list(pattern.check(rows)) == list(range(5))
        assert client.flow_stats("stream0").dropped_no_attachment == 7


def test_limits_refuse_a_session_and_an_attachment_with_the_reason(start_daemon):
    d = start_daemon(daemon_extra="  limits: {sessions_per_user: 1, attachments_per_user: 1}\n")
    with d.client("first") as first, first.attach_rx("stream0"):
        with pytest.raises(daqiri.ResourceExhausted, match="attachments_per_user"):
            first.attach_rx("stream1")
        with pytest.raises(daqiri.ResourceExhausted, match="already holds 1 sessions"):
            d.client("second")
    with d.control() as c:
        assert wait_for(lambda: not c.sessions())  # the daemon saw the hang-up
    with d.client("third") as third, third.attach_rx("stream1"):  # freed, taken again
        pass
