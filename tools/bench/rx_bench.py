#!/usr/bin/env python3
"""The Python client's side of tools/bench/run-python: receives like rx-bench does and prints
the same report ("ready", then "packets P bytes B seconds S").

    rx_bench.py view    SOCK FLOW BURST COUNT   a burst at a time: one 2-D view per burst
    rx_bench.py packets SOCK FLOW BURST COUNT   packet by packet: a view per payload
    rx_bench.py view-wait|packets-wait SOCK FLOW BURST COUNT   the same, sleeping on the
                                            stream's eventfd (wait_burst) whenever the ring
                                            is empty
    rx_bench.py overhead SOCK FLOW BURST        per-burst cost on a full ring, no sender

A receiving mode takes `block` last: blocking backpressure, as a TCP stream wants.
"""
import sys
import time

import daqiri


def receive(mode, sock, flow, burst, count, block=False):
    wait = mode.endswith("-wait")
    mode = mode.removesuffix("-wait")
    with daqiri.Client(sock, name="rx_bench.py") as c, c.attach_rx(flow, block=block) as rx:
        print("ready", flush=True)
        packets = nbytes = 0
        first = 0.0
        last = time.perf_counter()
        while packets < count:
            b = rx.wait_burst(0.1, burst) if wait else rx.next_burst(burst)
            now = time.perf_counter()
            if not b:
                if packets and now - last > 1.0:
                    break
                continue
            if not packets:
                first = now
            if mode == "view":
                nbytes += b.payloads().size  # touch what a consumer would: the burst's array
            else:
                for p in b:
                    nbytes += len(p.payload)
            packets += len(b)
            last = now
            rx.release(b)
        print(f"packets {packets} bytes {nbytes} seconds {last - first:.6f}")


def overhead(sock, flow, burst):
    """Fills a blocking ring, then times next_burst + payloads + release over all of it."""
    with daqiri.Client(sock, name="rx_bench.py") as c, c.attach_rx(flow, ring_size=4096, block=True) as rx:
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while rx._ring.producer < 4096 and time.monotonic() < deadline:
            time.sleep(0.01)
        n = bursts = 0
        t0 = time.perf_counter()
        while True:
            b = rx.next_burst(burst)
            if not b:
                break
            b.payloads()
            n += len(b)
            bursts += 1
            rx.release(b)
        dt = time.perf_counter() - t0
        print(f"overhead burst {burst}: {bursts} bursts, {n} packets in {dt * 1e3:.2f} ms: "
              f"{dt / bursts * 1e6:.2f} us per burst, {dt / n * 1e9:.0f} ns per packet")


if __name__ == "__main__":
    a = sys.argv[1:]
    block = len(a) == 6 and a[5] == "block"
    if (len(a) == 5 or block) and a[0] in ("view", "packets", "view-wait", "packets-wait"):
        receive(a[0], a[1], a[2], int(a[3]), int(a[4]), block)
    elif len(a) == 4 and a[0] == "overhead":
        overhead(a[1], a[2], int(a[3]))
    else:
        sys.exit(__doc__)
