"""daqiri-gen's payload (client/include/daqiri/test_pattern.hpp), vectorised: a 24-byte header
{magic, stream, sequence, length} then bytes that are a function of sequence and position."""
import numpy as np

MAGIC = 0x4E475144  # "DQGN"
HEADER_SIZE = 24
HEADER = np.dtype([("magic", "<u4"), ("stream", "<u4"), ("sequence", "<u8"), ("length", "<u4"),
                   ("reserved", "<u4")])


def expected(sequences, size, stream=0):
    """The payloads daqiri-gen sends for `sequences` (an array), `size` bytes each, as rows."""
    seq = np.asarray(sequences, np.uint64)[:, None]
    i = np.arange(size, dtype=np.uint64)[None, :]
    out = ((seq * 131 + i * 7 + (i >> 8)) & 0xFF).astype(np.uint8)
    head = np.zeros(len(seq), HEADER)
    head["magic"], head["stream"], head["sequence"], head["length"] = MAGIC, stream, seq[:, 0], size
    out[:, :HEADER_SIZE] = head.view(np.uint8).reshape(len(seq), HEADER_SIZE)
    return out


def headers(payloads):
    """The headers of a packets x bytes array of payloads (a structured copy)."""
    return np.ascontiguousarray(payloads[:, :HEADER_SIZE]).view(HEADER)[:, 0]


def check(payloads, stream=None):
    """The sequence numbers of a packets x bytes array of daqiri-gen payloads; raises
    ValueError naming the first packet that is not intact."""
    h = headers(payloads)
    want = expected(h["sequence"], payloads.shape[1], 0 if stream is None else stream)
    if stream is None:
        want[:, 4:8] = payloads[:, 4:8]
    bad = np.nonzero((payloads != want).any(axis=1))[0]
    if len(bad):
        raise ValueError(f"packet {bad[0]} of the burst (sequence {h['sequence'][bad[0]]}) is corrupt")
    return h["sequence"].copy()
