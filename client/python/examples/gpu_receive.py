#!/usr/bin/env python3
"""Receive a flow straight into GPU memory and work on it with torch, no copy on the way.

    python3 gpu_receive.py stream0 --count 100000

The flow's queue needs a `device` (or `pinned`) region (docs/gpu.md). Each burst's payloads
become a torch tensor over the ring (DLPack); the example checks daqiri-gen's pattern on the GPU
and sums the bytes per burst.
"""
import argparse

import torch

import daqiri
from daqiri import pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("flow")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--count", type=int, default=10000)
    a = ap.parse_args()

    total = corrupt = 0
    byte_sum = torch.zeros((), dtype=torch.int64, device="cuda")
    with daqiri.Client(a.socket, name="gpu_receive.py") as client, \
            client.attach_gpu_rx(a.flow) as ring:
        print(f"GPU ring of {ring.size} slots on cuda:{ring.device}", flush=True)
        for burst in ring.bursts(timeout=10.0):
            x = torch.from_dlpack(burst.payloads())          # packets x bytes, in the ring
            # The sequence, little-endian, byte by byte: payloads start 42 bytes into a slot, and
            # an int64 view would load from unaligned addresses (docs/python.md).
            seq = (x[:, 8:16].to(torch.int64) << (8 * torch.arange(8, device=x.device))).sum(dim=1)
            i = torch.arange(x.shape[1], device=x.device)
            want = ((seq[:, None] * 131 + i * 7 + (i >> 8)) & 0xFF).to(torch.uint8)
            corrupt += int((x[:, pattern.HEADER_SIZE:] != want[:, pattern.HEADER_SIZE:]).any(dim=1).sum())
            byte_sum += x.sum(dtype=torch.int64)
            total += len(burst)
            if total >= a.count:
                break
    print(f"received {total} packets on the GPU: {total - corrupt} intact, {corrupt} corrupt, "
          f"byte sum {int(byte_sum)}")


if __name__ == "__main__":
    main()
