"""daqiri.abi against client/include/daqiri/abi.h, compiled: every size and offset."""
import shutil
import subprocess

import numpy as np
import pytest

from daqiri import abi
from conftest import REPO

C_PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include "daqiri/abi.h"
#define F(t, m) printf(#t "." #m " %zu\n", offsetof(struct t, m))
#define S(t) printf(#t " %zu\n", sizeof(struct t))
int main(void) {
  S(daqiri_ring_header); S(daqiri_rx_desc); S(daqiri_tx_desc); S(daqiri_msg_hello);
  S(daqiri_msg_welcome); S(daqiri_msg_claim); S(daqiri_msg_attached); S(daqiri_msg_attached_gpu);
  S(daqiri_gpu_ring_info); S(daqiri_msg_error); S(daqiri_msg_detach); S(daqiri_rx_desc_compact);
  S(daqiri_batch_header);
  F(daqiri_batch_header, batch_id); F(daqiri_batch_header, packets_per_batch);
  F(daqiri_batch_header, slot_bytes); F(daqiri_batch_header, packets);
  F(daqiri_batch_header, missing); F(daqiri_batch_header, flags);
  printf("DAQIRI_DESC_BATCH %u\nDAQIRI_DESC_NIC_TIME %u\nDAQIRI_BATCH_TIMED_OUT %u\n",
         DAQIRI_DESC_BATCH, DAQIRI_DESC_NIC_TIME, DAQIRI_BATCH_TIMED_OUT);
  F(daqiri_rx_desc_compact, offset_lo); F(daqiri_rx_desc_compact, offset_hi);
  F(daqiri_rx_desc_compact, region); F(daqiri_rx_desc_compact, flags);
  F(daqiri_rx_desc_compact, length); F(daqiri_rx_desc_compact, flow_id);
  printf("DAQIRI_RING_RX %u\nDAQIRI_RING_RX_COMPACT %u\n", DAQIRI_RING_RX, DAQIRI_RING_RX_COMPACT);
  F(daqiri_rx_desc, offset); F(daqiri_rx_desc, timestamp_ns); F(daqiri_rx_desc, length);
  F(daqiri_rx_desc, flow_id); F(daqiri_rx_desc, region); F(daqiri_rx_desc, flags);
  F(daqiri_rx_desc, payload_offset); F(daqiri_rx_desc, stream);
  F(daqiri_ring_header, state); F(daqiri_ring_header, producer); F(daqiri_ring_header, consumer);
  F(daqiri_ring_header, consumer_flags); F(daqiri_ring_header, producer_flags);
  printf("DAQIRI_RING_NEED_WAKEUP %u\nDAQIRI_RING_NEED_KICK %u\n", DAQIRI_RING_NEED_WAKEUP,
         DAQIRI_RING_NEED_KICK);
  printf("DAQIRI_ABI_VERSION %u\nDAQIRI_RING_MAGIC %u\nDAQIRI_MSG_MAGIC %u\n", DAQIRI_ABI_VERSION,
         DAQIRI_RING_MAGIC, DAQIRI_MSG_MAGIC);
  F(daqiri_tx_desc, buffer); F(daqiri_tx_desc, length); F(daqiri_tx_desc, flags);
  F(daqiri_tx_desc, remote);
  printf("DAQIRI_DESC_MESSAGE %u\nDAQIRI_DESC_REMOTE_WRITE %u\nDAQIRI_DESC_SPLIT %u\n",
         DAQIRI_DESC_MESSAGE, DAQIRI_DESC_REMOTE_WRITE, DAQIRI_DESC_SPLIT);
  F(daqiri_gpu_ring_info, header_size);
  printf("DAQIRI_RDMA_WRITE_IMM %u\nDAQIRI_RDMA_READ %u\nDAQIRI_TX_CONNECTION_SHIFT %u\n",
         DAQIRI_RDMA_WRITE_IMM, DAQIRI_RDMA_READ, DAQIRI_TX_CONNECTION_SHIFT);
  printf("DAQIRI_COMPLETION_FAILED %u\nDAQIRI_COMPLETION_BUFFER %u\n", DAQIRI_COMPLETION_FAILED,
         DAQIRI_COMPLETION_BUFFER);
  printf("DAQIRI_TX_AT %u\nDAQIRI_TX_TIME_SHIFT %u\n", DAQIRI_TX_AT, DAQIRI_TX_TIME_SHIFT);
  struct daqiri_tx_desc timed = {0, 0, 0, 0};
  daqiri_tx_desc_set_time(&timed, 0x0123456789abcdefull);
  printf("timed.flags %u\ntimed.remote %u\n", timed.flags, timed.remote);
  return 0;
}
"""


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("abi")
    (d / "abi.c").write_text(C_PROGRAM)
    subprocess.run([cc, "-I", str(REPO / "client/include"), "-o", str(d / "abi"), str(d / "abi.c")], check=True)
    out = subprocess.run([str(d / "abi")], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def test_sizes_match_the_header(c_layout):
    assert c_layout["daqiri_ring_header"] == abi.RING_HEADER_SIZE
    assert c_layout["daqiri_rx_desc"] == abi.RX_DESC.itemsize
    assert c_layout["daqiri_rx_desc_compact"] == abi.RX_DESC_COMPACT.itemsize
    assert c_layout["daqiri_tx_desc"] == abi.TX_DESC.itemsize
    assert c_layout["daqiri_msg_hello"] == abi.HELLO.size
    assert c_layout["daqiri_msg_welcome"] == abi.WELCOME.size
    assert c_layout["daqiri_msg_claim"] == abi.CLAIM.size
    assert c_layout["daqiri_msg_detach"] == abi.DETACH.size
    assert c_layout["daqiri_msg_attached"] == abi.ATTACHED.size
    assert c_layout["daqiri_gpu_ring_info"] == abi.GPU_RING_INFO.size
    assert c_layout["daqiri_msg_attached_gpu"] == abi.ATTACHED_GPU_SIZE
    assert c_layout["daqiri_msg_error"] == abi.ERROR.size
    assert c_layout["daqiri_batch_header"] == abi.BATCH_HEADER_BYTES


def test_offsets_and_constants_match_the_header(c_layout):
    for name in abi.RX_DESC.names:
        assert c_layout[f"daqiri_rx_desc.{name}"] == abi.RX_DESC.fields[name][1], name
    for name in abi.RX_DESC_COMPACT.names:
        assert c_layout[f"daqiri_rx_desc_compact.{name}"] == abi.RX_DESC_COMPACT.fields[name][1], name
    assert c_layout["DAQIRI_RING_RX"] == abi.RING_RX
    assert c_layout["DAQIRI_RING_RX_COMPACT"] == abi.RING_RX_COMPACT
    assert c_layout["daqiri_ring_header.state"] == abi.WORD_STATE * 4
    assert c_layout["daqiri_ring_header.producer"] == abi.WORD_PRODUCER * 4
    assert c_layout["daqiri_ring_header.consumer"] == abi.WORD_CONSUMER * 4
    assert c_layout["daqiri_ring_header.consumer_flags"] == abi.WORD_CONSUMER_FLAGS * 4
    assert c_layout["daqiri_ring_header.producer_flags"] == abi.WORD_PRODUCER_FLAGS * 4
    assert c_layout["DAQIRI_RING_NEED_WAKEUP"] == abi.RING_NEED_WAKEUP
    assert c_layout["DAQIRI_RING_NEED_KICK"] == abi.RING_NEED_KICK
    assert c_layout["DAQIRI_ABI_VERSION"] == abi.ABI_VERSION
    assert c_layout["DAQIRI_RING_MAGIC"] == abi.RING_MAGIC
    assert c_layout["DAQIRI_MSG_MAGIC"] == abi.MSG_MAGIC
    for name in abi.TX_DESC.names:
        assert c_layout[f"daqiri_tx_desc.{name}"] == abi.TX_DESC.fields[name][1], name
    assert c_layout["DAQIRI_DESC_MESSAGE"] == abi.DESC_MESSAGE
    assert c_layout["DAQIRI_DESC_REMOTE_WRITE"] == abi.DESC_REMOTE_WRITE
    assert c_layout["DAQIRI_DESC_SPLIT"] == abi.DESC_SPLIT
    assert c_layout["DAQIRI_DESC_BATCH"] == abi.DESC_BATCH
    assert c_layout["DAQIRI_DESC_NIC_TIME"] == abi.DESC_NIC_TIME
    assert c_layout["DAQIRI_BATCH_TIMED_OUT"] == abi.BATCH_TIMED_OUT
    for name in abi.BATCH_HEADER.names:
        assert c_layout[f"daqiri_batch_header.{name}"] == abi.BATCH_HEADER.fields[name][1], name
    assert c_layout["daqiri_gpu_ring_info.header_size"] == abi.GPU_RING_INFO.size - 4  # the last word
    assert c_layout["DAQIRI_RDMA_WRITE_IMM"] == abi.RDMA_WRITE_IMM
    assert c_layout["DAQIRI_RDMA_READ"] == abi.RDMA_READ
    assert c_layout["DAQIRI_TX_CONNECTION_SHIFT"] == abi.TX_CONNECTION_SHIFT
    assert c_layout["DAQIRI_COMPLETION_FAILED"] == abi.COMPLETION_FAILED
    assert c_layout["DAQIRI_COMPLETION_BUFFER"] == abi.COMPLETION_BUFFER
    assert c_layout["DAQIRI_TX_AT"] == abi.TX_AT
    assert c_layout["DAQIRI_TX_TIME_SHIFT"] == abi.TX_TIME_SHIFT
    # what TxStream.submit writes for a send time, as daqiri_tx_desc_set_time does
    at = 0x0123456789ABCDEF
    assert c_layout["timed.flags"] == abi.TX_AT | ((at >> 32) & 0xFFFFFF) << abi.TX_TIME_SHIFT
    assert c_layout["timed.remote"] == at & 0xFFFFFFFF


PAYLOAD_SEARCH = r"""
#include <stdio.h>
#include <string.h>
#include "daqiri/abi.h"
int main(void) {  /* a frame in hex a line -> daqiri_udp_payload_offset */
  static char line[8192];
  static uint8_t frame[4096];
  while (fgets(line, sizeof line, stdin)) {
    uint32_t n = 0;
    for (const char* p = line; p[0] && p[1] && p[0] != '\n'; p += 2) {
      unsigned v;
      sscanf(p, "%2x", &v);
      frame[n++] = (uint8_t)v;
    }
    printf("%u\n", daqiri_udp_payload_offset(frame, n));
  }
  return 0;
}
"""


def test_payload_search_matches_the_header(tmp_path):
    """frames.udp_payload_offset, which finds the payloads of frames the daemon left unread
    (abi.PAYLOAD_UNREAD), answers as abi.h's daqiri_udp_payload_offset does."""
    from daqiri import frames
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    udp = frames.udp_headers(("10.1.0.1", 1000), ("10.1.0.2", 7000), 100) + bytes(range(100))

    def tag(f, tpid):
        return f[:12] + tpid.to_bytes(2, "big") + b"\x00\x05" + f[12:]

    cases = [
        (udp, 42),
        (tag(udp, 0x8100), 46),
        (tag(tag(udp, 0x8100), 0x88A8), 50),
        (tag(tag(tag(udp, 0x8100), 0x8100), 0x88A8), 0),  # a third tag is not looked through
        (udp[:14] + b"\x47" + udp[15:34] + bytes(8) + udp[34:], 50),  # IPv4 options
        (udp[:23] + b"\x06" + udp[24:], 0),  # TCP
        (udp[:20] + b"\x00\xb9" + udp[22:], 0),  # a later fragment
        (udp[:12] + b"\x86\xdd" + udp[14:], 0),  # not IPv4
        (udp[:40], 0),  # cut inside the UDP header
        (udp[:13], 0),
    ]
    (tmp_path / "search.c").write_text(PAYLOAD_SEARCH)
    subprocess.run([cc, "-I", str(REPO / "client/include"), "-o", str(tmp_path / "search"),
                    str(tmp_path / "search.c")], check=True)
    out = subprocess.run([str(tmp_path / "search")], input="".join(f.hex() + "\n" for f, _ in cases),
                         check=True, capture_output=True, text=True).stdout.split()
    assert [int(x) for x in out] == [at for _, at in cases]
    assert [frames.udp_payload_offset(f) for f, _ in cases] == [at for _, at in cases]
    assert [frames.udp_payload_offset(np.frombuffer(f, np.uint8)) for f, _ in cases] == [at for _, at in cases]
