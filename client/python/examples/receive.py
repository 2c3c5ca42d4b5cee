#!/usr/bin/env python3
"""Receive a flow and print what arrived each second; --verify checks daqiri-gen's payloads.

    python3 receive.py stream0 [--socket /run/daqiri/daqiri.sock] [--count N] [--verify]
"""
import argparse
import time

import daqiri
from daqiri import pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flow")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--count", type=int, default=0, help="stop after this many packets")
    ap.add_argument("--verify", action="store_true", help="check daqiri-gen's pattern")
    ap.add_argument("--block", action="store_true", help="a full ring holds the flow back")
    a = ap.parse_args()

    total = nbytes = 0
    expect = None
    with daqiri.Client(a.socket, name="receive.py") as client, \
            client.attach_rx(a.flow, block=a.block) as rx:
        print(f"attached to {a.flow} (session {client.session_id})", flush=True)
        last, last_total = time.monotonic(), 0
        for burst in rx.bursts(timeout=None if not a.count else 10.0):
            total += len(burst)
            nbytes += burst.nbytes
            if a.verify:
                # One 2-D view per burst when the packets share a size; else packet by packet.
                try:
                    groups = [burst.payloads()]
                except ValueError:
                    groups = [p.payload[None, :] for p in burst]
                for g in groups:
                    seqs = pattern.check(g)
                    if expect is not None and seqs[0] != expect:
                        print(f"sequence jumps from {expect} to {seqs[0]}")
                    expect = int(seqs[-1]) + 1
            now = time.monotonic()
            if now - last >= 1.0:
                print(f"{(total - last_total) / (now - last):12.0f} pps  total {total}", flush=True)
                last, last_total = now, total
            if a.count and total >= a.count:
                break
    print(f"received {total} packets, {nbytes} bytes")


if __name__ == "__main__":
    main()
