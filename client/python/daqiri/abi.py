"""The shared-memory ABI of client/include/daqiri/abi.h (version ABI_VERSION), in Python terms.

abi.h is the authority; the sizes below are checked against it by the tests (test_abi.py).
"""
import struct

import numpy as np

ABI_VERSION = 6
RING_MAGIC = 0x44515249
MSG_MAGIC = 0x4451534D
RING_HEADER_SIZE = 256
TOKEN_BYTES = 16
MAX_REGIONS = 4

# enum daqiri_ring_kind
RING_RX, RING_TX, RING_COMPLETION, RING_GPU, RING_RX_COMPACT = 1, 2, 3, 4, 5
# enum daqiri_ring_state
RING_ACTIVE, RING_DETACHED = 1, 2
RING_NEED_WAKEUP = 0x1
RING_NEED_KICK = 0x1  # producer_flags

# daqiri_rx_desc.flags
DESC_HEADERS_SYNTHESIZED = 0x1
DESC_TRUNCATED = 0x2
DESC_STREAM = 0x4
DESC_MESSAGE = 0x8  # RDMA: a whole message
DESC_REMOTE_WRITE = 0x10  # RDMA: a peer's WRITE with immediate into the remote window
DESC_SPLIT = 0x20  # GPU ring with header-data split: the frame's first header_size bytes are in its header slot
# daqiri_rx_desc.payload_offset: the daemon did not read the frame (frames.udp_payload_offset finds it)
PAYLOAD_UNREAD = 0xFFFF
DESC_NIC_TIME = 0x40  # timestamp_ns is the NIC's
DESC_BATCH = 0x80  # a reorder's batch: a BATCH_HEADER, then the batch from payload_offset on

# daqiri_batch_header, at the start of a batch's buffer
BATCH_HEADER = np.dtype([
    ("batch_id", "<u8"),
    ("packets_per_batch", "<u4"),
    ("slot_bytes", "<u4"),
    ("packets", "<u4"),
    ("missing", "<u4"),
    ("flags", "<u4"),
])
BATCH_HEADER_BYTES = 64
BATCH_TIMED_OUT = 0x1

# enum daqiri_msg_type
MSG_HELLO, MSG_WELCOME, MSG_CLAIM, MSG_ATTACHED, MSG_DETACH, MSG_DETACHED, MSG_ERROR = range(1, 8)
# enum daqiri_direction
DIRECTION_RX, DIRECTION_TX, DIRECTION_GPU_RX = 1, 2, 3

RX_DESC = np.dtype([
    ("offset", "<u8"),
    ("timestamp_ns", "<u8"),
    ("length", "<u4"),
    ("flow_id", "<u4"),
    ("region", "<u2"),
    ("flags", "<u2"),
    ("payload_offset", "<u2"),
    ("stream", "<u2"),
])
# daqiri_rx_desc_compact: an RX ring attached with compact=True (no stamp, payload offset or stream)
RX_DESC_COMPACT = np.dtype([
    ("offset_lo", "<u4"),
    ("offset_hi", "<u2"),
    ("region", "u1"),
    ("flags", "u1"),
    ("length", "<u4"),
    ("flow_id", "<u4"),
])
# daqiri_tx_desc.flags on RDMA queues: the operation, and the connection above bit 16
RDMA_SEND, RDMA_WRITE, RDMA_WRITE_IMM, RDMA_READ = range(4)
TX_CONNECTION_SHIFT = 16
# daqiri_tx_desc.flags on a queue with accurate_send: a send time (daqiri_tx_desc_set_time)
TX_AT = 0x80
TX_TIME_SHIFT = 8
COMPLETION_FAILED = 0x80000000  # in a completion ring entry: the buffer came back unsent
COMPLETION_BUFFER = 0x7FFFFFFF
TX_DESC = np.dtype([("buffer", "<u4"), ("length", "<u4"), ("flags", "<u4"), ("remote", "<u4")])
COMPLETION = np.dtype("<u4")

# Ring header fields, as indices of uint32 words (byte offset / 4).
WORD_MAGIC, WORD_VERSION_KIND, WORD_SIZE, WORD_DESC_SIZE, WORD_DESC_OFFSET, WORD_STATE = range(6)
WORD_PRODUCER, WORD_CONSUMER, WORD_CONSUMER_FLAGS, WORD_PRODUCER_FLAGS = 64 // 4, 128 // 4, 192 // 4, 196 // 4

# Session messages (little-endian, no padding beyond what abi.h has).
HEADER = struct.Struct("<IHHII")  # magic, version, type, length, reserved
HELLO = struct.Struct("<16s64s")
WELCOME = struct.Struct("<16sQ")
CLAIM = struct.Struct("<16sQ16s")
DETACH = struct.Struct("<16sQ")
REGION_INFO = struct.Struct("<QIIII")  # size, buf_size, num_bufs, writable, reserved
ATTACHED = struct.Struct("<16sQIIQQQ" + "QIIII" * MAX_REGIONS)
GPU_RING_INFO = struct.Struct("<16sQQQQIIII")  # uuid, alloc, doorbell, desc, payload, size, slot, gpu,
#                                                header_size
ATTACHED_GPU_SIZE = ATTACHED.size + GPU_RING_INFO.size
ERROR = struct.Struct("<16siIQ256s")


def header(msg_type, length):
    return HEADER.pack(MSG_MAGIC, ABI_VERSION, msg_type, length, 0)
