"""GPU rings from Python: torch and cupy tensors of the ring hold exactly what daqiri-gen sent.

Runs where a GPU, libcuda and torch (or cupy) are present (the GPU machine, tools/gpu-check);
skips elsewhere, saying why."""
import ctypes
import gc
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import daqiri
from daqiri import pattern
from conftest import GPU_CONFIG, REORDER_CONFIG, expected_samples, gen, send_samples


def _gpu_reason():
    try:
        from daqiri import cuda
        cuda.driver()
        count = ctypes.c_int()
        cuda.check(cuda.driver().cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        return None if count.value else "no GPU"
    except daqiri.DaqiriError as e:
        return str(e)


_why = _gpu_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"no usable GPU: {_why}")



@pytest.fixture
def gpu_daemon(start_daemon):
    return start_daemon(GPU_CONFIG)


def test_torch_tensor_equals_the_payload_sent(gpu_daemon):
    torch = pytest.importorskip("torch")
    before = torch.cuda.current_device()
    with gpu_daemon.client() as client, client.attach_gpu_rx("stream0") as ring:
        assert torch.cuda.current_device() == before
        gen(4096, 3000, 1000, rate=200000)
        got = []
        for burst in ring.bursts(timeout=5.0):
            via_dlpack = torch.from_dlpack(burst.payloads())
            via_cai = torch.as_tensor(burst.payloads(), device=f"cuda:{ring.device}")
            assert via_dlpack.device.type == "cuda" and via_dlpack.shape == (len(burst), 1000)
            assert torch.equal(via_dlpack, via_cai)
            want = torch.from_numpy(pattern.expected(np.arange(len(got), len(got) + len(burst)), 1000,
                                                     stream=4096)).to(via_dlpack.device)
            assert torch.equal(via_dlpack, want), f"burst at {len(got)} differs"
            got += [len(burst)]
            d = burst.descriptors
            assert (d["length"] == 1042).all() and (d["payload_offset"] == 42).all()
            if sum(got) >= 3000:
                break
        assert sum(got) == 3000
        [a] = [a for a in client.stats().attachments if a.gpu]
        assert (a.gpu_packets, a.gpu_bytes) == (3000, 3000 * 1042)


def test_cupy_array_and_the_caller_context_left_alone(gpu_daemon):
    cp = pytest.importorskip("cupy")
    from daqiri import cuda
    current = ctypes.c_void_p()
    lib = cuda.driver()
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    cp.zeros(1).sum()  # cupy's context is current now
    lib.cuCtxGetCurrent(ctypes.byref(current))
    with gpu_daemon.client() as client, client.attach_gpu_rx("stream1") as ring:
        gen(4097, 500, 300, rate=100000)
        seqs = []
        for burst in ring.bursts(timeout=5.0):
            a = cp.asarray(burst.payloads())
            assert a.shape == (len(burst), 300)
            seqs += pattern.check(cp.asnumpy(a), stream=4097).tolist()
            if len(seqs) >= 500:
                break
        after = ctypes.c_void_p()
        lib.cuCtxGetCurrent(ctypes.byref(after))
        assert after.value == current.value
        assert seqs == list(range(500))


def test_detaching_returns_gpu_memory(gpu_daemon):
    torch = pytest.importorskip("torch")
    with gpu_daemon.client() as client:
        client.attach_gpu_rx("stream0").close()  # the daemon's CUDA context and kernels load once
        free0 = torch.cuda.mem_get_info()[0]
        ring = client.attach_gpu_rx("stream0")
        assert torch.cuda.mem_get_info()[0] < free0  # the daemon allocated the ring
        ring.close()
        del ring
        gc.collect()
        deadline = time.monotonic() + 5
        while torch.cuda.mem_get_info()[0] < free0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert torch.cuda.mem_get_info()[0] >= free0


def test_header_data_split_headers_and_payloads_line_up(start_daemon):
    """A queue with a header region: each frame's first 64 bytes in host header slots
    (burst.headers), the rest in the GPU ring (burst.frames), index for index."""
    config = GPU_CONFIG.replace(
        "{{name: gpu_rx,", "{{name: hdr, kind: host, buf_size: 64, num_bufs: 64}}\n  - {{name: gpu_rx,")\
        .replace("regions: [gpu_rx]", "regions: [hdr, gpu_rx]")
    daemon = start_daemon(config)
    with daemon.client() as client, client.attach_gpu_rx("stream0") as ring:
        assert ring.header_size == 64
        gen(4096, 2000, 1000, rate=200000)
        seen = 0
        for burst in ring.bursts(timeout=5.0):
            d = burst.descriptors
            assert (d["length"] == 1042).all() and (d["flags"] & daqiri.abi.DESC_SPLIT).all()
            frames = np.concatenate([burst.headers, burst.frames.copy_to_host()[:, :1042 - 64]], axis=1)
            want = pattern.expected(np.arange(seen, seen + len(burst)), 1000, stream=4096)
            assert (frames[:, 42:] == want).all(), f"burst at {seen} differs"
            seen += len(burst)
            if seen >= 2000:
                break
        assert seen == 2000


def test_a_reorders_batches_reach_a_gpu_ring_whole(start_daemon):
    torch = pytest.importorskip("torch")
    d = start_daemon(REORDER_CONFIG.replace("{{name: batches, kind: host,",
                                            "{{name: batches, kind: device, gpu: 0,"))
    with d.client() as client, client.attach_gpu_rx("beams") as ring:
        send_samples()
        got = []
        for burst in ring.bursts(timeout=5.0):
            assert (burst.descriptors["flags"] & daqiri.abi.DESC_BATCH).all()
            got += list(torch.from_dlpack(burst.payloads()).cpu())
            if len(got) >= 2:
                break
    assert len(got) >= 2
    for batch in (0, 1):
        slots = got[batch][:4 * 24].numpy().view(np.float32).reshape(4, 6)
        assert (slots == expected_samples(batch)).all(), f"batch {batch}"


# A kernel over a host ring mapped for the GPU: thread 0 waits for `n` packets behind the producer
# index (host memory, acquire at system scope), the block copies each payload into `out`, then
# stores the consumer index (release at system scope): the buffers go back from the GPU.
_MAPPED_COPY = r"""
extern "C" __global__ void take(const unsigned* producer, unsigned* consumer,
                                const unsigned char* descs, unsigned mask, unsigned desc_size,
                                const unsigned char* region, unsigned n, unsigned size,
                                unsigned char* out) {
  if (threadIdx.x == 0) {
    unsigned p;
    do {
      asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(p) : "l"(producer) : "memory");
    } while ((int)(p - n) < 0);
  }
  __syncthreads();
  for (unsigned c = 0; c < n; ++c) {
    const unsigned char* d = descs + (c & mask) * desc_size;
    unsigned long long offset = *(const unsigned long long*)d;   /* daqiri_rx_desc.offset */
    unsigned short at = *(const unsigned short*)(d + 28);         /* .payload_offset */
    for (unsigned i = threadIdx.x; i < size; i += blockDim.x)
      out[(unsigned long long)c * size + i] = region[offset + at + i];
  }
  __syncthreads();
  if (threadIdx.x == 0)
    asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(consumer), "r"(n) : "memory");
}
"""


def test_a_kernel_reads_a_mapped_host_ring_where_it_is_and_releases_it(start_daemon):
    cp = pytest.importorskip("cupy")
    from conftest import HOST_CONFIG, wait_for
    assert daqiri.abi.RX_DESC.fields["payload_offset"][1] == 28
    d = start_daemon(HOST_CONFIG)
    take = cp.RawKernel(_MAPPED_COPY, "take")
    with d.client() as client, client.attach_rx("stream0") as rx, \
            daqiri.MappedRxRing(rx, device=0) as m:
        out = cp.zeros((500, 1000), cp.uint8)
        take((1,), (256,), (cp.uint64(m.producer), cp.uint64(m.consumer), cp.uint64(m.descs),
                            cp.uint32(m.mask), cp.uint32(daqiri.abi.RX_DESC.itemsize),
                            cp.uint64(m.regions[0][0]), cp.uint32(500), cp.uint32(1000),
                            out))
        gen(4096, 500, 1000, rate=100000)
        cp.cuda.Device().synchronize()
        assert (cp.asnumpy(out) == pattern.expected(np.arange(500), 1000, stream=4096)).all()
        # The GPU's store of the consumer index gave every buffer back; the stream is attached.
        assert wait_for(lambda: client.flow_stats("stream0").buffers_on_loan == 0)
        assert client.flow_stats("stream0").packets == 500


# The example's stages wait in a CUDA stream for the relay's batches, check every packet's
# pattern on the GPU and give each batch back through the relay: every packet once, intact, and
# the consumer index at the producer's once it is done.
def test_stream_stages_take_every_packet_once_from_a_mapped_rings_relay(start_daemon):
    pytest.importorskip("cupy")
    from conftest import HOST_CONFIG
    d = start_daemon(HOST_CONFIG)
    example = Path(__file__).resolve().parents[1] / "examples" / "mapped_receive.py"
    p = subprocess.Popen([sys.executable, "-X", "faulthandler", str(example), "stream0", "--socket", d.socket, "--count", "20000",
                          "--batches", "8", "--block", "--timeout", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "relay of 8 batches a launch" in p.stdout.readline()
        gen(4096, 20000, 1000, rate=200000)
        out, err = p.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)  # faulthandler: where it waits
        out, err = p.communicate()
        raise AssertionError(f"the example hung: {out} {err}") from None
    assert p.returncode == 0, err
    assert ("received 20000 packets through the relay" in out and
            "20000 intact, 0 corrupt, 0 repeated, 20000 distinct; released up to 20000 of 20000" in out), out


# The relay's rules: steps in pairs, one count a launch, nothing after stop; a stop whose steps
# wait for a stage never launched says so within its bound, and the steps finish once it comes.
def test_a_mapped_rings_relay_refuses_what_it_cannot_run(start_daemon):
    cp = pytest.importorskip("cupy")
    from conftest import HOST_CONFIG
    d = start_daemon(HOST_CONFIG)
    relay_stream = cp.cuda.Stream(non_blocking=True)
    stages = cp.cuda.Stream(non_blocking=True)
    with d.client() as client, client.attach_rx("stream0") as rx, \
            daqiri.MappedRxRing(rx, device=0) as m:
        with pytest.raises(daqiri.InvalidArgument, match="even number of batches"):
            m.relay.launch(relay_stream.ptr, 3)
        m.relay.launch(relay_stream.ptr, 2)
        with pytest.raises(daqiri.InvalidArgument, match="runs 2 batches a launch, not 4"):
            m.relay.launch(relay_stream.ptr, 4)
        started = time.monotonic()  # step 1 waits for stage 0, never launched
        with pytest.raises(daqiri.Unavailable, match="launch as many stages as relay batches"):
            m.relay.stop()
        assert time.monotonic() - started < 3
        for k in (0, 1):
            m.relay.wait_batch(stages.ptr, k)
            m.relay.finish_batch(stages.ptr, k)
        relay_stream.synchronize()
        stages.synchronize()
        with pytest.raises(daqiri.FailedPrecondition, match="relay was stopped"):
            m.relay.launch(relay_stream.ptr, 2)
