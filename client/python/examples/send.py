#!/usr/bin/env python3
"""Send UDP datagrams through daqirid's TX queue: frames written in place into TX buffers.

    python3 send.py lo 127.0.0.1:5000 --count 1000 --size 1024
"""
import argparse

import numpy as np

import daqiri
from daqiri import frames, pattern


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("interface")
    ap.add_argument("dest", help="HOST:PORT")
    ap.add_argument("--socket", default=None)
    ap.add_argument("--source", default="127.0.0.1:40000", help="the interface's address:port")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024, help="payload bytes (daqiri-gen's pattern)")
    a = ap.parse_args()
    host, port = a.dest.rsplit(":", 1)
    shost, sport = a.source.rsplit(":", 1)
    dst, src = (host, int(port)), (shost, int(sport))

    with daqiri.Client(a.socket, name="send.py") as client, client.attach_tx(a.interface) as tx:
        sent = 0
        while sent < a.count:
            bufs = tx.reserve(min(64, a.count - sent))
            payloads = pattern.expected(np.arange(sent, sent + len(bufs)), a.size, stream=dst[1])
            for b, p in zip(bufs, payloads):
                b.length = frames.write_udp(b.data, src, dst, p)
            while bufs:
                n = tx.submit(bufs)
                bufs = bufs[n:]
                sent += n
        tx.flush()
    print(f"sent {sent} packets of {a.size} payload bytes to {a.dest}")


if __name__ == "__main__":
    main()
