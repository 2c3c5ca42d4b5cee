"""What every attachment has in common: an id, an eventfd to sleep on, the session it lives in,
and an end; and, for the two receiving kinds (host RX rings, GPU rings), bursts taken off a
ring in order and released in order."""
import os
import select
import time

from . import abi
from .errors import Detached
from .ring import WAIT_SLICE

KICK = (1).to_bytes(8, "little")  # what a kick eventfd is written


class Stream:
    """Base of RxStream, TxStream and GpuRxRing. `_ring` is the ring whose state tells whether
    the daemon still serves the attachment."""

    _eventfd = -1
    _kick = -1
    _ring = None

    def _adopt(self, client, attached):
        """Takes the attachment's eventfd, and its kick eventfd (host RX and TX rings: the
        daemon's doorbell), in the client's current session."""
        self._client = client
        self._session = client._session
        self.id = attached.attachment_id
        if self._kick >= 0:
            os.close(self._kick)
            self._kick = -1
        if attached.direction in (abi.DIRECTION_RX, abi.DIRECTION_TX):
            self._kick = os.dup(attached.fds[2 + len(attached.regions)])
        self._eventfd = os.dup(attached.fds[1])
        os.set_blocking(self._eventfd, False)
        self._poll = select.poll()
        self._poll.register(self._eventfd, select.POLLIN)
        self._poll.register(self._session.fileno(), select.POLLRDHUP)

    def _open(self, client, attached):
        """Maps what ATTACHED carried and adopts it (each kind of stream defines it)."""
        raise NotImplementedError

    def _reattach(self, client):
        """The same attachment again, in the client's new session (Client.reconnect)."""
        if self._eventfd >= 0:
            os.close(self._eventfd)
            self._eventfd = -1
        self._open(client, client._claim(self.options))

    @property
    def detached(self):
        """The daemon stopped serving this stream: flow deleted, client cut off, daemon gone."""
        return self._eventfd < 0 or not self._ring.active or self._session.broken

    def _sleep(self, ring, seen, deadline):
        """Sleeps on the eventfd until `ring`'s producer moves past `seen`, for at most one
        WAIT_SLICE; False when `deadline` (monotonic seconds, or None) has passed."""
        if ring.arm_wakeup() == seen:
            left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - time.monotonic())
            if left <= 0:
                ring.disarm_wakeup()
                return False
            if self._poll.poll(left * 1000 + 0.5):
                try:
                    os.read(self._eventfd, 8)
                except BlockingIOError:
                    pass
        ring.disarm_wakeup()
        return True

    def close(self):
        """Detaches: the daemon takes back every buffer of the attachment."""
        if self._eventfd < 0:
            return
        self._client._forget(self)
        self._session.detach(self.id)
        os.close(self._eventfd)
        self._eventfd = -1
        if self._kick >= 0:
            os.close(self._kick)
            self._kick = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ReceiveStream(Stream):
    """Bursts off `_ring` in order: `_burst(first, start, n)` makes one; `_read` is the next
    counter to hand out, `_released` the consumer index published."""

    _read = 0
    _released = 0

    @property
    def pending(self):
        """Packets handed out and not yet released."""
        return (self._read - self._released) & 0xFFFFFFFF

    def next_burst(self, max=0):
        """What has arrived, up to `max` packets (0: no limit); an empty burst when nothing has.
        A burst never spans the ring's end."""
        ring = self._ring
        avail = (ring.producer - self._read) & 0xFFFFFFFF
        if avail > ring.size:
            avail = 0  # not a value the daemon could have written
        start = self._read & ring.mask
        n = min(avail, ring.size - start)
        if max:
            n = min(n, max)
        first = self._read
        self._read = (self._read + n) & 0xFFFFFFFF
        return self._burst(first, start, n)

    def wait_burst(self, timeout=None, max=0):
        """As next_burst, sleeping up to `timeout` seconds (None: for ever) for something to
        arrive; an empty burst on timeout. Raises Detached once the stream is detached."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            b = self.next_burst(max)
            if b:
                return b
            if self.detached:
                raise Detached("the stream is detached")
            if not self._sleep(self._ring, self._read, deadline):
                return b

    def _release_to(self, end):
        if (end - self._released) & 0xFFFFFFFF > self.pending:
            raise ValueError("not a burst of this stream, or released already")
        self._released = end
        self._ring.publish_consumer(end)
        if self._kick >= 0 and self._ring.producer_wants_kick():  # the flow waits for it
            os.write(self._kick, KICK)

    def release_all(self):
        """Releases everything handed out."""
        self._release_to(self._read)

    def bursts(self, timeout=None, max=0):
        """Yields bursts until the stream is detached (or nothing came for `timeout` seconds),
        releasing each one when the loop asks for the next."""
        while True:
            try:
                b = self.wait_burst(timeout, max)
            except Detached:
                return
            if not b:
                return
            yield b
            if self._eventfd >= 0:
                self.release(b)

    def __iter__(self):
        return self.bursts()
