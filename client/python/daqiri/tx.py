"""TX streams: fill buffers of the client's TX region in place, hand them to the daemon."""
import os
import time

import numpy as np

from . import abi
from .errors import DaqiriError, Detached
from .ring import Ring
from .rx import map_fd
from .stream import KICK, Stream


class TxBuffer:
    """A TX buffer the client holds: write a frame into `data`, set `length`, submit it.
    On RDMA queues `op` (abi.RDMA_SEND, _WRITE, _WRITE_IMM, _READ), `connection` (0: the first
    connected) and `remote_slot` (the peer's window slot) say what to do with it; on a
    tx_policy tcp queue `data` is a message and `connection` (0: the first open) its TCP
    connection; other queues cut a client that sets them. On a queue with accurate_send, `send_at_ns` (a
    CLOCK_REALTIME time in ns, as time.time_ns() gives) is when the frame leaves at the
    earliest; 0: at once."""

    __slots__ = ("index", "data", "length", "op", "connection", "remote_slot", "send_at_ns")

    def __init__(self, index, data):
        self.index = index
        self.data = data  # writable uint8 view of the whole buffer
        self.length = 0
        self.op = abi.RDMA_SEND
        self.connection = 0
        self.remote_slot = 0
        self.send_at_ns = 0


class TxStream(Stream):
    """One TX queue of an interface. Every buffer starts with the client; a submitted buffer
    belongs to the daemon until it comes back through the completion ring (reclaim())."""

    def __init__(self, client, attached, options, kick=True):
        self.options = options
        self.kick = kick
        self._open(client, attached)

    def _open(self, client, attached):
        try:
            if len(attached.regions) != 1 or attached.completion_offset <= attached.ring_offset:
                raise DaqiriError("the daemon's TX attachment does not check out")
            self._rings_map = map_fd(attached.fds[0], attached.rings_size, True)
            self._ring = Ring(self._rings_map, attached.ring_offset, attached.completion_offset,
                              abi.RING_TX, abi.TX_DESC)
            self._completion = Ring(self._rings_map, attached.completion_offset, attached.rings_size,
                                    abi.RING_COMPLETION, abi.COMPLETION)
            region = attached.regions[0]
            self._map = map_fd(attached.fds[2], region.size, True)
            self._adopt(client, attached)
        finally:
            attached.close()
        self.buf_size = region.buf_size
        self.num_bufs = region.num_bufs
        self._buffers = np.frombuffer(self._map, np.uint8, count=region.buf_size * region.num_bufs)
        self._buffers = self._buffers.reshape(region.num_bufs, region.buf_size)
        self._free = list(range(region.num_bufs - 1, -1, -1))
        self._mine = np.ones(region.num_bufs, np.bool_)  # True while the client holds it
        self._produced = 0
        self._completed = 0
        self._in_flight = 0
        self.failed = 0  # buffers that came back without their work done

    @property
    def free(self):
        """Buffers the client holds and has not reserved."""
        return len(self._free)

    def reclaim(self):
        """Takes back buffers the daemon is done with; returns how many."""
        c = self._completion
        p = c.producer
        n = 0
        while self._completed != p:
            e = int(c.slots[self._completed & c.mask])
            b = e & abi.COMPLETION_BUFFER
            if b < self.num_bufs and not self._mine[b]:
                if e & abi.COMPLETION_FAILED:
                    self.failed += 1
                self._mine[b] = True
                self._free.append(b)
                n += 1
            self._completed = (self._completed + 1) & 0xFFFFFFFF
        if n:
            self._in_flight -= n
            c.publish_consumer(self._completed)
        return n

    def reserve(self, count):
        """Up to `count` buffers to fill; fewer while the daemon still has the rest."""
        self.reclaim()
        n = min(count, len(self._free))
        out = [TxBuffer(b, self._buffers[b]) for b in self._free[len(self._free) - n:]]
        del self._free[len(self._free) - n:]
        return out

    def submit(self, buffers):
        """Queues `length` bytes of each buffer for sending (an Ethernet/IPv4/UDP frame from the
        interface's address). Returns how many were queued: the ring may take fewer."""
        if self.detached:
            raise Detached("the stream is detached")
        tx = self._ring
        room = tx.size - ((self._produced - tx.consumer) & 0xFFFFFFFF)
        take = list(buffers[:max(room, 0)])
        indices = [b.index for b in take]
        for b in take:
            if not (0 <= b.index < self.num_bufs) or not self._mine[b.index] or not 0 < b.length <= self.buf_size:
                raise ValueError(f"buffer {b.index}: not one this stream holds, or length {b.length} out of range")
            if not (0 <= b.op <= abi.RDMA_READ and 0 <= b.connection <= 0xFFFF and 0 <= b.remote_slot <= 0xFFFFFFFF):
                raise ValueError(f"buffer {b.index}: op, connection or remote_slot out of range")
            if b.send_at_ns < 0:
                raise ValueError(f"buffer {b.index}: send_at_ns is a time, not {b.send_at_ns}")
        if len(set(indices)) != len(indices):
            raise ValueError("a buffer appears twice")
        for b in take:
            self._mine[b.index] = False
            flags = b.op | b.connection << abi.TX_CONNECTION_SHIFT
            remote = b.remote_slot
            if b.send_at_ns:  # daqiri_tx_desc_set_time
                flags = abi.TX_AT | ((b.send_at_ns >> 32) & 0xFFFFFF) << abi.TX_TIME_SHIFT
                remote = b.send_at_ns & 0xFFFFFFFF
            tx.slots[self._produced & tx.mask] = (b.index, b.length, flags, remote)
            self._produced = (self._produced + 1) & 0xFFFFFFFF
        n = len(take)
        self._in_flight += n
        tx.publish_producer(self._produced)
        if n and self.kick and tx.consumer_wants_wakeup():  # the daemon's poller sleeps
            os.write(self._kick, KICK)
        return n

    def send(self, frames):
        """Copies each frame (bytes-like) into a buffer and submits them; returns how many went."""
        bufs = self.reserve(len(frames))
        for b, f in zip(bufs, frames):
            f = np.frombuffer(f, np.uint8)
            b.data[:len(f)] = f
            b.length = len(f)
        sent = self.submit(bufs)
        for b in reversed(bufs[sent:]):
            self._free.append(b.index)
        return sent

    @property
    def in_flight(self):
        """Buffers submitted and not yet back."""
        return self._in_flight

    def flush(self, timeout=5.0):
        """Waits until every submitted buffer is back; raises Detached or DaqiriError."""
        deadline = time.monotonic() + timeout
        while self.reclaim() or self._in_flight:
            if self.detached:
                raise Detached("the stream is detached")
            if not self._sleep(self._completion, self._completed, deadline):
                raise DaqiriError(f"the daemon did not send everything in time ({self._in_flight} left)")
