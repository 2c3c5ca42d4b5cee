#!/usr/bin/env python3
"""Receive a flow in a CUDA stream from a host ring mapped for the GPU, checking it with cupy.

    python3 mapped_receive.py stream0 --count 100000 --batches 8

The flow's queue needs a host region (docs/gpu.md, "Mapped host rings"). The packets stay in the
daemon's shared host memory. Relay steps (a CUDA graph on a stream of their own) publish what
arrived as batches; each consumer stage waits for its batch in a second stream, checks
daqiri-gen's pattern over it in one kernel and marks it done, which gives its buffers back to
the daemon. No host thread touches a packet.
"""
import argparse
import os
import time

# Before CUDA starts: a kernel loaded lazily while a relay step spins would wait for the step,
# and the step for the stage that kernel belongs to.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
import cupy as cp  # noqa: E402

import daqiri  # noqa: E402
from daqiri import abi, pattern  # noqa: E402

# One warp a packet: the sequence number from the payload's header, the pattern after it, and a
# bit per sequence number (a second sighting counts as repeated).
_CHECK = r"""
extern "C" __global__ void check_batch(const unsigned* batch, const unsigned char* descs,
                                       unsigned mask, unsigned desc_size,
                                       const unsigned long long* regions, unsigned magic,
                                       unsigned long long* counts, unsigned* seen,
                                       unsigned long long seen_bits) {
  const unsigned begin = batch[0], end = batch[1];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warps = gridDim.x * blockDim.x / 32;
  for (unsigned c = begin + (blockIdx.x * blockDim.x + threadIdx.x) / 32; (int)(c - end) < 0;
       c += warps) {
    const unsigned char* d = descs + (unsigned long long)(c & mask) * desc_size;
    const unsigned long long offset = *(const unsigned long long*)d;
    const unsigned length = *(const unsigned*)(d + 16);
    const unsigned short region = *(const unsigned short*)(d + 24);
    const unsigned short at = *(const unsigned short*)(d + 28);
    const unsigned char* p = (const unsigned char*)regions[region] + offset + at;
    const unsigned size = length - at;
    unsigned long long seq = 0;
    unsigned head = 0;
    for (int b = 0; b < 8; ++b) seq |= (unsigned long long)p[8 + b] << (8 * b);
    for (int b = 0; b < 4; ++b) head |= (unsigned)p[b] << (8 * b);
    unsigned bad = lane == 0 && head != magic;
    for (unsigned i = 24 + lane; i < size; i += 32)
      bad |= p[i] != (unsigned char)((seq * 131 + i * 7 + (i >> 8)) & 0xFF);
    bad = __any_sync(0xffffffffu, bad);
    if (lane == 0) {
      atomicAdd(&counts[0], 1ull);
      if (bad) atomicAdd(&counts[1], 1ull);
      if (seq < seen_bits &&
          (atomicOr(&seen[seq / 32], 1u << (seq % 32)) & (1u << (seq % 32))) != 0)
        atomicAdd(&counts[2], 1ull);
    }
  }
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flow")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--batches", type=int, default=8, help="relay steps a launch (even)")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds without a packet")
    ap.add_argument("--block", action="store_true", help="a full ring holds the flow back (allow_block)")
    a = ap.parse_args()

    check = cp.RawKernel(_CHECK, "check_batch")
    check.compile()  # loaded now, not at the first stage, while the relay spins
    relay_stream = cp.cuda.Stream(non_blocking=True)
    stages = cp.cuda.Stream(non_blocking=True)
    counts = cp.zeros(3, cp.uint64)  # packets, corrupt, repeated
    seen = cp.zeros((a.count + 31) // 32, cp.uint32)
    with daqiri.Client(a.socket, name="mapped_receive.py") as client, \
            client.attach_rx(a.flow, block=a.block) as rx, daqiri.MappedRxRing(rx, device=0) as m:
        regions = cp.asarray([address for address, _ in m.regions], cp.uint64)
        posted = 0

        def post():
            """A relay launch and as many stages; an event when the stages are done."""
            nonlocal posted
            m.relay.launch(relay_stream.ptr, a.batches)
            with stages:
                for k in range(posted, posted + a.batches):
                    m.relay.wait_batch(stages.ptr, k)
                    check((8,), (256,), (cp.uint64(m.relay.batch), cp.uint64(m.descs), cp.uint32(m.mask),
                                         cp.uint32(abi.RX_DESC.itemsize), regions, cp.uint32(pattern.MAGIC),
                                         counts, seen, cp.uint64(a.count)))
                    m.relay.finish_batch(stages.ptr, k)
            posted += a.batches
            done = cp.cuda.Event(disable_timing=True)
            done.record(stages)
            return done

        in_flight = [post(), post()]  # the relay never waits for the host
        # Ready once the first posts are in: the first launch loads the relay's PTX, which the
        # driver compiles for this GPU (a first run on a host takes it from no cache).
        print(f"mapped ring of {m.mask + 1} slots, relay of {a.batches} batches a launch", flush=True)
        received, last_change = 0, time.monotonic()
        while received < a.count and time.monotonic() - last_change < a.timeout:
            if in_flight[0].done:
                in_flight.pop(0)
                in_flight.append(post())
            else:
                time.sleep(0.0005)
            got = int(counts[0].get())
            if got != received:
                received, last_change = got, time.monotonic()
        in_flight.append(post())  # its first step gives the last batch back
        m.relay.stop()
        stages.synchronize()
        packets, corrupt, repeated = (int(x) for x in counts.get())
        distinct = int(cp.unpackbits(seen.view(cp.uint8)).sum())
        producer, consumer = m.indices()
    print(f"received {packets} packets through the relay in {posted} batches: {packets - corrupt} intact, "
          f"{corrupt} corrupt, {repeated} repeated, {distinct} distinct; released up to {consumer} of {producer}")


if __name__ == "__main__":
    main()
