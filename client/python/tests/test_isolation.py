"""Clients are untrusted and unprivileged: a Python client as a throwaway uid, one killed with
buffers held, one that lies about its consumer index. None costs the others anything."""
import signal
import subprocess
import sys
import textwrap

import pytest

import daqiri
from conftest import assert_sequences, gen, stream, wait_for

RECEIVER = textwrap.dedent("""
    import sys, daqiri
    from daqiri import pattern
    with daqiri.Client(sys.argv[1], name="unprivileged") as c:
        try:
            c.create_flow("mine", "lo", "rx0", udp_dst=4200)
        except daqiri.PermissionDenied as e:
            print("create_flow refused:", e.code.name, flush=True)
        with c.attach_rx("stream1", block=True) as rx:
            print("attached", flush=True)
            seqs, nbytes = [], 0
            for b in rx.bursts(timeout=5.0):
                m = b.payloads()
                assert not m.flags.writeable
                seqs += pattern.check(m, stream=4097).tolist()
                nbytes += m.size
                if len(seqs) >= int(sys.argv[2]):
                    break
            print("received", len(seqs), "packets", nbytes, "bytes, in order:", seqs == list(range(len(seqs))), flush=True)
""")

HOLDER = textwrap.dedent("""
    import sys, time, daqiri
    c = daqiri.Client(sys.argv[1], name="holder")
    rx = c.attach_rx("stream0", block=True)
    held = 0
    while held < int(sys.argv[2]):
        held += len(rx.wait_burst(5.0))
    print("holding", held, flush=True)
    time.sleep(60)
""")


def test_unprivileged_client_receives_its_flow(start_daemon, temp_user):
    d = start_daemon(daemon_extra=f"  socket_group: {temp_user.name}\n"
                                  f"  access:\n    clients:\n      users: [{temp_user.name}]\n")
    proc = temp_user.popen([sys.executable, "-c", RECEIVER, d.socket, "2000"])
    with d.control() as c:
        assert wait_for(lambda: c.flow_stats("stream1").attachments == 1 or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()[0]
        gen(4097, 2000, 400, rate=100000)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "create_flow refused: PERMISSION_DENIED" in out
        assert "received 2000 packets 800000 bytes, in order: True" in out
        assert wait_for(lambda: c.sessions() == [])  # its session ended with it
        assert wait_for(lambda: c.flow_stats("stream1").buffers_on_loan == 0)
        assert "mine" not in [f.name for f in c.flows()]


def test_killed_client_returns_every_buffer_and_others_lose_nothing(daemon):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, daemon.socket, "500"],
                              stdout=subprocess.PIPE, text=True)
    with daemon.client("survivor") as client, client.attach_rx("stream1", block=True) as rx:
        assert wait_for(lambda: client.flow_stats("stream0").attachments == 1)
        gen(4096, 500, 100)
        assert holder.stdout.readline().startswith("holding 500")
        assert wait_for(lambda: client.flow_stats("stream0").buffers_on_loan == 500)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert wait_for(lambda: client.flow_stats("stream0").buffers_on_loan == 0)
        assert wait_for(lambda: client.flow_stats("stream0").attachments == 0)
        rows, _ = stream(rx, 4097, 300, 100)
        assert_sequences(rows, 4097, 300)


def test_a_lying_client_is_cut_off_alone(daemon):
    with daemon.client("liar") as liar, daemon.client("honest") as honest, \
            honest.attach_rx("stream1", block=True) as good:
        bad = liar.attach_rx("stream0", block=True)
        gen(4096, 10, 100)
        assert len(bad.wait_burst(5.0)) > 0
        bad._ring.publish_consumer(bad._read + 1000)  # buffers it never got
        gen(4096, 10, 100)
        assert wait_for(lambda: not liar.connected)
        with pytest.raises(daqiri.Detached):
            while True:
                bad.wait_burst(1.0)
        assert wait_for(lambda: honest.stats().sessions_cut_off == 1)
        assert wait_for(lambda: honest.flow_stats("stream0").buffers_on_loan == 0)
        rows, _ = stream(good, 4097, 200, 64)
        assert_sequences(rows, 4097, 200)
