"""Fixtures: the real daqirid and daqiri-gen of a build, throwaway users. Nothing here imitates
the daemon.

Programs come from $DAQIRI_TEST_DAQIRID / $DAQIRI_TEST_GEN (set by ctest), or
$DAQIRI_TEST_BIN_DIR (a bundle with the programs side by side), or the release build.
"""
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

import daqiri
from daqiri import pattern

REPO = Path(__file__).resolve().parents[3]


def program(env, built_at):
    if os.environ.get(env):
        return os.environ[env]
    if os.environ.get("DAQIRI_TEST_BIN_DIR"):
        return os.path.join(os.environ["DAQIRI_TEST_BIN_DIR"], os.path.basename(built_at))
    return str(REPO / "build" / built_at)


DAQIRID = program("DAQIRI_TEST_DAQIRID", "daemon/daqirid")
GEN = program("DAQIRI_TEST_GEN", "tools/daqiri-gen/daqiri-gen")

HOST_CONFIG = """daemon:
  socket: {socket}
  metrics: "off"
{daemon_extra}memory_regions:
  - {{name: rx_host, kind: host, buf_size: 2048, num_bufs: 4096}}
  - {{name: tx_host, kind: host, buf_size: 2048, num_bufs: 512}}
interfaces:
  - name: lo
    backend: socket
    address: 127.0.0.1
    rx:
      queues:
        - {{name: rx0, batch_size: 64, ring_size: 1024, regions: [rx_host]}}
    tx:
      queues:
        - {{name: tx0, batch_size: 64, ring_size: 256, regions: [tx_host]}}
flows:
  - {{name: stream0, interface: lo, queue: rx0, match: {{udp_dst: 4096}}, allow_block: true}}
  - {{name: stream1, interface: lo, queue: rx0, match: {{udp_dst: 4097}}, allow_block: true}}
"""

# The host config with a reorder of its own flow: sequence numbers in the payload's first byte,
# four packets a batch, int8 samples to fp32.
REORDER_CONFIG = HOST_CONFIG.replace(
    "  - {{name: tx_host, kind: host, buf_size: 2048, num_bufs: 512}}\n",
    "  - {{name: tx_host, kind: host, buf_size: 2048, num_bufs: 512}}\n"
    "  - {{name: batches, kind: host, buf_size: 4096, num_bufs: 16}}\n") + """\
  - {{name: samples, interface: lo, queue: rx0, match: {{udp_dst: 4630}}}}
reorders:
  - name: beams
    interface: lo
    flows: [samples]
    region: batches
    payload_offset: 44
    sequence: {{bit_offset: 336, bit_width: 8}}
    packets_per_batch: 4
    convert: {{input: int8, output: fp32}}
    timeout_us: 200000
"""

# The reorder's samples: packet `seq` carries [seq, 0] and six int8 samples (seq * 10 + k) % 128.
# Batch 0 goes shuffled and whole; batch 1 lacks sequence 6 and is closed by batch 2's first.
REORDER_SENT = (3, 0, 2, 1, 5, 4, 7, 8)


def send_samples(port=4630):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in REORDER_SENT:
            s.sendto(bytes([seq, 0]) + bytes((seq * 10 + k) % 128 for k in range(6)),
                     ("127.0.0.1", port))


def expected_samples(batch):
    """Batch `batch`'s slots as fp32, a row a slot; zeros where nothing was sent."""
    return np.array([[(s * 10 + k) % 128 if s in REORDER_SENT else 0 for k in range(6)]
                     for s in range(batch * 4, batch * 4 + 4)], np.float32)


# The same with the RX queue on GPU 0: each GPU attachment gets a ring of 4096 slots there.
GPU_CONFIG = HOST_CONFIG.replace(
    "{{name: rx_host, kind: host, buf_size: 2048, num_bufs: 4096}}",
    "{{name: gpu_rx, kind: device, gpu: 0, buf_size: 2048, num_bufs: 8192}}").replace(
    "ring_size: 1024, regions: [rx_host]", "ring_size: 4096, regions: [gpu_rx]")


class Daemon:
    def __init__(self, directory, template, daemon_extra=""):
        self.dir = directory
        self.socket = os.path.join(directory, "d.sock")
        self.config = os.path.join(directory, "d.yaml")
        Path(self.config).write_text(template.format(socket=self.socket, daemon_extra=daemon_extra))
        self.log_path = os.path.join(directory, "daqirid.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([DAQIRID, "--config", self.config], stdout=log, stderr=log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daqirid exited {self.proc.returncode}:\n{self.log()}")
            if os.path.exists(self.socket):
                with daqiri.Control(self.socket, timeout=1.0) as c:
                    if c.health():
                        return
            time.sleep(0.05)
        raise RuntimeError(f"daqirid did not become ready:\n{self.log()}")

    def log(self):
        return Path(self.log_path).read_text(errors="replace")

    def client(self, name="pytest"):
        return daqiri.Client(self.socket, name=name)

    def control(self):
        return daqiri.Control(self.socket)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def workdir():
    # World-readable: an unprivileged client must reach the socket inside.
    d = tempfile.mkdtemp(prefix="daqiri-py-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def start_daemon(workdir):
    started = []

    def start(template=HOST_CONFIG, daemon_extra=""):
        """`template`: YAML with {socket} and {daemon_extra} (lines under `daemon:`)."""
        d = Daemon(workdir, template, daemon_extra)
        started.append(d)
        return d

    yield start
    for d in started:
        code = d.stop()
        # A clean stop, or the sanitizer build's report would be lost.
        assert code == 0, f"daqirid exited {code}:\n{d.log()}"


@pytest.fixture
def daemon(start_daemon):
    return start_daemon()


def gen(port, count, size, rate=None, wait=True):
    """daqiri-gen: `count` packets of `size` payload bytes to 127.0.0.1:port, sequences 0...
    wait=False: returns the running process (finish it with finish())."""
    cmd = [GEN, "--dest", f"127.0.0.1:{port}", "--count", str(count), "--size", str(size)]
    if rate:
        cmd += ["--rate", str(rate)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return finish(p) if wait else p


def finish(p):
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return out


def wait_for(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def receive(rx, count, timeout=10.0):
    """Packets until `count` arrived: (payload rows copied out, flow ids); releases as it goes."""
    rows, flows = [], []
    deadline = time.monotonic() + timeout
    got = 0
    while got < count and time.monotonic() < deadline:
        b = rx.wait_burst(0.2)
        if not b:
            continue
        rows.append(b.payloads(copy=True))
        flows.append(b.flow_ids.copy())
        got += len(b)
        rx.release(b)
    return (np.concatenate(rows) if rows else np.empty((0, 0), np.uint8),
            np.concatenate(flows) if flows else np.empty(0, np.uint32))


def assert_sequences(rows, port, count):
    """`rows` are daqiri-gen's payloads 0..count-1 to `port`, intact and in order."""
    assert len(rows) == count, f"{len(rows)} packets of {count}"
    seqs = pattern.check(rows, stream=port)
    assert (seqs == np.arange(count)).all(), f"out of order or missing from {np.argmax(seqs != np.arange(count))}"


def stream(rx, port, count, size, rate=100000):
    """daqiri-gen sends while `rx` receives; returns what receive() does."""
    p = gen(port, count, size, rate, wait=False)
    try:
        return receive(rx, count)
    finally:
        finish(p)


class TempUser:
    """A system user with its own group, created for one test and removed afterwards."""

    def __init__(self):
        self.name = "dqp" + secrets.token_hex(4)
        subprocess.run(["/usr/sbin/useradd", "--system", "--user-group", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", self.name], check=True, capture_output=True)
        pw = pwd.getpwnam(self.name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def popen(self, args):
        """Starts `args` as this user (setpriv), with this Python's import path; output piped."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        return subprocess.Popen(["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                                 *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def remove(self):
        subprocess.run(["/usr/sbin/userdel", self.name], capture_output=True)


@pytest.fixture
def temp_user():
    if os.geteuid() != 0:
        pytest.skip("needs root to create a user")
    u = TempUser()
    yield u
    u.remove()
