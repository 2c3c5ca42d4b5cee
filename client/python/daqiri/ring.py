"""A view of one ring of the ABI (header + slots) inside a shared mapping.

Index loads and stores are aligned 4-byte numpy element accesses, single instructions; on
x86-64 (total store order) a load of `producer` followed by loads of slots has the acquire
order the ABI asks for, and a store of `consumer` after the reads has release order. The one
store-then-load that needs a full fence (NEED_WAKEUP, then re-reading `producer`) goes through
fence(), and waits never sleep longer than WAIT_SLICE without looking again, so a wake-up lost
on a weaker machine costs at most that.
"""
import threading

import numpy as np

from . import abi
from .errors import DaqiriError

WAIT_SLICE = 0.010  # seconds

_fence_lock = threading.Lock()


def fence():
    # An uncontended lock round trip is an atomic read-modify-write: a full barrier on x86-64.
    _fence_lock.acquire()
    _fence_lock.release()


class Ring:
    __slots__ = ("words", "size", "mask", "slots")

    def __init__(self, buf, offset, limit, kind, dtype):
        """`buf`: a writable buffer (mmap); the ring's header at `offset`, nothing of it past
        `limit`. `dtype`: the slot type (None for a GPU ring's control block)."""
        if offset % 64 or offset + abi.RING_HEADER_SIZE > limit:
            raise DaqiriError(f"a ring at {offset} does not fit {limit} bytes")
        self.words = np.frombuffer(buf, dtype="<u4", count=abi.RING_HEADER_SIZE // 4, offset=offset)
        w = self.words
        size, desc_size, desc_offset = int(w[abi.WORD_SIZE]), int(w[abi.WORD_DESC_SIZE]), int(w[abi.WORD_DESC_OFFSET])
        want_size = 0 if dtype is None else dtype.itemsize
        if (w[abi.WORD_MAGIC] != abi.RING_MAGIC or (w[abi.WORD_VERSION_KIND] & 0xFFFF) != abi.ABI_VERSION
                or (w[abi.WORD_VERSION_KIND] >> 16) != kind or size == 0 or size & (size - 1)
                or desc_size != want_size or desc_offset < abi.RING_HEADER_SIZE
                or offset + desc_offset + size * desc_size > limit):
            raise DaqiriError("the daemon's ring does not check out against abi.h")
        self.size = size
        self.mask = size - 1
        self.slots = None if dtype is None else np.frombuffer(buf, dtype=dtype, count=size, offset=offset + desc_offset)

    @property
    def producer(self):
        return int(self.words[abi.WORD_PRODUCER])

    @property
    def consumer(self):
        return int(self.words[abi.WORD_CONSUMER])

    @property
    def active(self):
        return self.words[abi.WORD_STATE] == abi.RING_ACTIVE

    def publish_producer(self, value):
        self.words[abi.WORD_PRODUCER] = value & 0xFFFFFFFF

    def consumer_wants_wakeup(self):
        """After publish_producer: whether the consumer sleeps and must be woken (the fence
        first, so that the consumer either sees the new producer or we see its flag)."""
        fence()
        return bool(self.words[abi.WORD_CONSUMER_FLAGS] & abi.RING_NEED_WAKEUP)

    def publish_consumer(self, value):
        self.words[abi.WORD_CONSUMER] = value & 0xFFFFFFFF

    def producer_wants_kick(self):
        """After publish_consumer: whether the producer waits for releases (no fence: abi.h,
        a kick lost to the race costs the daemon's timed sleep)."""
        return bool(self.words[abi.WORD_PRODUCER_FLAGS] & abi.RING_NEED_KICK)

    def arm_wakeup(self):
        """Asks for a wake-up; returns `producer` as read after the flag is visible."""
        self.words[abi.WORD_CONSUMER_FLAGS] = abi.RING_NEED_WAKEUP
        fence()
        return self.producer

    def disarm_wakeup(self):
        self.words[abi.WORD_CONSUMER_FLAGS] = 0
