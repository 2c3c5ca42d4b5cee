#!/usr/bin/env python3
"""Rewrites one of DAQIRI's socket benchmark configs (examples/daqiri_bench_socket_*_tx_rx.yaml)
for one side of a run-daqiri point, on stdout:

    daqiri_bench_config.py CONFIG server|client PAYLOAD BATCH QUEUE_CORE APP_CORE [NUM_BUFS]

Only the interface of that side is kept (server: the receiver, client: the sender), so that a
DAQIRI process and daqirid can each take one side, and the receiver's TX queues go (it sends
nothing); buffers and max_payload_size grow to hold
PAYLOAD, every queue's batch_size becomes BATCH and its cpu_core QUEUE_CORE; master_core and
the socket_bench_SIDE section's cpu_core become APP_CORE, and that section runs for as long as
the process does (iterations 0), sending or receiving PAYLOAD-byte messages. NUM_BUFS, when
given, replaces every region's num_bufs.
"""
import sys

import yaml


def main(path, side, payload, batch, queue_core, app_core, num_bufs=0):
    doc = yaml.safe_load(open(path))
    cfg = doc["daqiri"]["cfg"]
    cfg["interfaces"] = [i for i in cfg["interfaces"] if i["socket_config"]["mode"] == side]
    cfg["master_core"] = app_core
    buf = max(2048, payload + 64)
    for region in cfg["memory_regions"]:
        region["buf_size"] = buf
        if num_bufs:
            region["num_bufs"] = num_bufs
    for interface in cfg["interfaces"]:
        if side == "server":
            interface.pop("tx", None)
        interface["socket_config"]["max_payload_size"] = buf
        for direction in ("rx", "tx"):
            for q in interface.get(direction, {}).get("queues", []):
                q["cpu_core"] = queue_core
                q["batch_size"] = batch
    for other in ("server", "client"):
        if other != side:
            doc.pop("socket_bench_" + other, None)
    doc["socket_bench_" + side].update({
        "cpu_core": app_core, "iterations": 0, "message_size": payload,
        "send": side == "client", "receive": side == "server"})
    yaml.safe_dump(doc, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    if len(sys.argv) not in (7, 8) or sys.argv[2] not in ("server", "client"):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
