"""RX streams: bursts of received packets as read-only numpy views of the daemon's buffers."""
import mmap
from typing import NamedTuple

import numpy as np

from . import abi, frames
from .errors import DaqiriError
from .ring import Ring
from .stream import ReceiveStream


def map_fd(fd, size, writable):
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return mmap.mmap(fd, size, mmap.MAP_SHARED, prot)


class Packet(NamedTuple):
    frame: np.ndarray    # uint8, the Ethernet frame (TCP: the stream's bytes; RDMA: the message)
    payload: np.ndarray  # uint8, its UDP payload (TCP, RDMA: the same bytes)
    flow_id: int
    timestamp_ns: int
    flags: int           # abi.DESC_*
    stream: int          # TCP and RDMA flows: which connection (1, 2, ...)


class Batch(NamedTuple):
    """A reorder's batch (docs/reorder.md): its header's fields and its slots."""
    batch_id: int
    packets_per_batch: int
    slot_bytes: int
    packets: int          # placed, a duplicate counted
    missing: int          # slots no packet filled (zeros)
    timed_out: bool
    data: np.ndarray      # uint8, packets_per_batch slots of slot_bytes, read-only

    def slots(self, dtype=np.uint8):
        """The slots as a (packets_per_batch, n) array of `dtype` (a view, no copy)."""
        return self.data.view(dtype).reshape(self.packets_per_batch, -1)


def batch_of(packet):
    """The Batch a reorder's packet carries (abi.DESC_BATCH), or None for any other packet."""
    if not packet.flags & abi.DESC_BATCH or len(packet.frame) < abi.BATCH_HEADER_BYTES:
        return None
    h = packet.frame[:abi.BATCH_HEADER.itemsize].view(abi.BATCH_HEADER)[0]
    ppb, slot = int(h["packets_per_batch"]), int(h["slot_bytes"])
    data = packet.frame[abi.BATCH_HEADER_BYTES:abi.BATCH_HEADER_BYTES + ppb * slot]
    if len(data) != ppb * slot:
        return None
    return Batch(int(h["batch_id"]), ppb, slot, int(h["packets"]), int(h["missing"]),
                 bool(h["flags"] & abi.BATCH_TIMED_OUT), data)


class Burst:
    """Packets delivered together: descriptors and read-only views into the daemon's buffers.

    Valid until released (RxStream.release): after that the daemon reuses the buffers and the
    views show whatever lands there next. A burst never spans the ring's end.
    """

    __slots__ = ("_stream", "first", "desc", "_payload_offsets", "_offsets")

    def __init__(self, stream, first, desc):
        self._stream = stream
        self.first = first
        # structured array of abi.RX_DESC (abi.RX_DESC_COMPACT for a compact stream), a view of
        # the ring's slots
        self.desc = desc
        self._payload_offsets = None
        self._offsets = None

    @property
    def compact(self):
        return self.desc.dtype == abi.RX_DESC_COMPACT

    def __len__(self):
        return len(self.desc)

    def __bool__(self):
        return len(self.desc) != 0

    def __iter__(self):
        return (self[i] for i in range(len(self.desc)))

    def __getitem__(self, i):
        d = self.desc[i]
        start = int(self.offsets[i])
        frame = self._stream._region(int(d["region"]))[start:start + int(d["length"])]
        flags = int(d["flags"])
        compact = self.compact
        po = abi.PAYLOAD_UNREAD if compact else int(d["payload_offset"])
        if po == abi.PAYLOAD_UNREAD:
            po = frames.udp_payload_offset(frame)
        whole = flags & (abi.DESC_STREAM | abi.DESC_MESSAGE)  # a stream's bytes, an RDMA message
        payload = frame if whole else frame[po:] if 0 < po <= len(frame) else frame[:0]
        if compact:
            return Packet(frame, payload, int(d["flow_id"]), 0, flags, 0)
        return Packet(frame, payload, int(d["flow_id"]), int(d["timestamp_ns"]), flags, int(d["stream"]))

    @property
    def offsets(self):
        """Where each frame starts in its region (uint64)."""
        if self._offsets is None:
            d = self.desc
            if self.compact:
                self._offsets = d["offset_lo"].astype(np.uint64) | d["offset_hi"].astype(np.uint64) << np.uint64(32)
            else:
                self._offsets = d["offset"]
        return self._offsets

    # Metadata of every packet, as arrays.
    @property
    def lengths(self):
        return self.desc["length"]

    @property
    def flow_ids(self):
        return self.desc["flow_id"]

    @property
    def timestamps_ns(self):
        """The daemon's receive stamps (zeros for a compact stream, which carries none)."""
        if self.compact:
            return np.zeros(len(self.desc), np.uint64)
        return self.desc["timestamp_ns"]

    @property
    def flags(self):
        return self.desc["flags"]

    @property
    def payload_offsets(self):
        """Where each UDP payload starts in its frame (0: not UDP), found here for frames the
        daemon did not read (abi.PAYLOAD_UNREAD)."""
        if self._payload_offsets is None:
            if self.compact:
                po = np.full(len(self.desc), abi.PAYLOAD_UNREAD, np.uint16)
            else:
                po = self.desc["payload_offset"]
            unread = np.flatnonzero(po == abi.PAYLOAD_UNREAD)
            if len(unread):
                po = po.copy()
                offsets = self.offsets
                for i in unread:
                    d = self.desc[i]
                    start = int(offsets[i])
                    region = self._stream._region(int(d["region"]))
                    po[i] = frames.udp_payload_offset(region[start:start + int(d["length"])])
            self._payload_offsets = po
        return self._payload_offsets

    @property
    def nbytes(self):
        return int(self.desc["length"].sum(dtype=np.uint64))

    def payloads(self, copy=None):
        """The UDP payloads as one 2-D uint8 array (packets x bytes); they must share a size.

        A read-only view of the buffers when they lie at equal distances in one region (the
        usual case: the daemon hands out buffers in the order they came back); otherwise a
        copy, or ValueError when `copy` is False. copy=True always copies.
        """
        return self._matrix(True, copy)

    def frames(self, copy=None):
        """The whole frames as one 2-D uint8 array, as payloads() does for payloads."""
        return self._matrix(False, copy)

    def _matrix(self, payload, copy):
        d = self.desc
        n = len(d)
        if n == 0:
            return np.empty((0, 0), np.uint8)
        starts = self.offsets.astype(np.int64)
        widths = d["length"].astype(np.int64)
        if payload:
            skip = self.payload_offsets
            starts += skip
            widths -= skip
        width = int(widths[0])
        regions = d["region"]
        if width < 0 or (n > 1 and (widths != width).any()):
            raise ValueError("the packets of this burst differ in size: index them one by one")
        if n > 1 and (regions != regions[0]).any():
            raise ValueError("the packets of this burst lie in different regions")
        region = self._stream._region(int(regions[0]))
        if starts.min() < 0 or starts.max() + width > len(region):
            raise DaqiriError("a descriptor points outside its region")
        first = int(starts[0])
        if copy is not True:
            if n == 1:
                return region[first:first + width][None]
            # Buffers in pool order: one strided view. Every row was bounds-checked above, so a
            # negative stride (a burst in descending buffer order) stays inside the region too.
            stride = int(starts[1]) - first
            if stride != 0 and (n == 2 or (np.diff(starts) == stride).all()):
                return np.ndarray((n, width), np.uint8, region, first, (stride, 1))
            if copy is False:
                raise ValueError("the buffers of this burst are not evenly spaced: no single view")
        return region[starts[:, None] + np.arange(width)]


class RxStream(ReceiveStream):
    """Packets of one flow (or of every flow of a queue), in one ring.

    for burst in rx.bursts():       # each burst is released when the loop moves on
        consume(burst.payloads())
    """

    def __init__(self, client, attached, options):
        self.options = options
        self._open(client, attached)

    def _open(self, client, attached):
        try:
            self._rings_map = map_fd(attached.fds[0], attached.rings_size, True)
            compact = self.options.compact
            self._ring = Ring(self._rings_map, attached.ring_offset, attached.rings_size,
                              abi.RING_RX_COMPACT if compact else abi.RING_RX,
                              abi.RX_DESC_COMPACT if compact else abi.RX_DESC)
            self._maps = [map_fd(fd, r.size, False) for fd, r in zip(attached.fds[2:], attached.regions)]
            self._regions = [np.frombuffer(m, np.uint8) for m in self._maps]
            self._adopt(client, attached)
        finally:
            attached.close()
        self.regions = attached.regions
        self._read = self._released = 0

    def _region(self, i):
        return self._regions[i] if i < len(self._regions) else self._regions[0][:0]

    def _burst(self, first, start, n):
        return Burst(self, first, self._ring.slots[start:start + n])

    def release(self, burst):
        """Returns the burst's buffers (and those of earlier bursts) to the daemon."""
        if burst._stream is not self:
            raise ValueError("not a burst of this stream")
        self._release_to((burst.first + len(burst)) & 0xFFFFFFFF)
