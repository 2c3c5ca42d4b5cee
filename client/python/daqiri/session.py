"""The session socket (SOCK_SEQPACKET): HELLO/WELCOME, CLAIM/ATTACHED with fds, DETACH.

The connection is the session's lifeline: closing it (or the process ending) ends every
attachment of the session and returns every buffer the process held.
"""
import os
import select
import socket
from dataclasses import dataclass

from . import abi
from .errors import DaqiriError, FailedPrecondition, Unavailable, from_code

_MAX_FDS = 2 + abi.MAX_REGIONS + 1


@dataclass
class RegionInfo:
    size: int
    buf_size: int
    num_bufs: int
    writable: bool


@dataclass
class GpuRingInfo:
    device_uuid: bytes
    alloc_size: int
    doorbell_offset: int
    desc_offset: int
    payload_offset: int
    size: int
    slot_size: int
    gpu: int
    header_size: int = 0  # header-data split: bytes of each frame in the host header slots


@dataclass
class Attached:
    """ATTACHED and its fds (owned: close() them, or hand them on)."""
    attachment_id: int
    direction: int
    rings_size: int
    ring_offset: int
    completion_offset: int
    regions: list
    fds: list
    gpu: GpuRingInfo = None

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class Session:
    def __init__(self, path, name):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            try:
                self.sock.connect(path)
            except OSError as e:
                raise Unavailable(f"connect {path}: {e.strerror}") from None
            # The daemon answers ERROR instead of WELCOME when it will not take the session (a
            # limit reached) and hangs up, perhaps before the HELLO arrives: its reason is still
            # there to read when the send failed.
            hello = abi.header(abi.MSG_HELLO, abi.HELLO.size) + name.encode()[:63].ljust(64, b"\0")
            try:
                self.sock.sendmsg([hello])
                sent = None
            except OSError as e:
                sent = e
            try:
                try:
                    msg, fds, _, _ = socket.recv_fds(self.sock, abi.ERROR.size, _MAX_FDS,
                                                     0 if sent is None else socket.MSG_DONTWAIT)
                except ConnectionResetError:
                    # A hang-up while our HELLO was unread is reported first, the reply after it.
                    msg, fds, _, _ = socket.recv_fds(self.sock, abi.ERROR.size, _MAX_FDS,
                                                     socket.MSG_DONTWAIT)
            except OSError as e:
                raise Unavailable(f"session socket: {(sent or e).strerror}") from None
            for fd in fds:  # the daemon sends none with WELCOME or ERROR
                os.close(fd)
            mtype = abi.HEADER.unpack_from(msg)[2] if len(msg) >= abi.HEADER.size else 0
            if mtype == abi.MSG_ERROR and len(msg) == abi.ERROR.size:
                _, code, _, _, text = abi.ERROR.unpack(msg)
                raise from_code(code, text.split(b"\0", 1)[0].decode(errors="replace") or "refused")
            if sent is not None:
                raise Unavailable(f"session socket: {sent.strerror}") from None
            if len(msg) != abi.WELCOME.size or mtype != abi.MSG_WELCOME:
                raise Unavailable("daqirid refused the session")
        except BaseException:
            self.sock.close()
            raise
        self.id = abi.WELCOME.unpack(msg)[1]

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()

    @property
    def broken(self):
        """True once the daemon closed its end (it stopped, or cut the session off)."""
        if self.sock.fileno() < 0:
            return True
        p = select.poll()
        p.register(self.sock, select.POLLRDHUP)
        return any(ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR) for _, ev in p.poll(0))

    def _send(self, msg):
        try:
            self.sock.sendmsg([msg])
        except OSError as e:
            raise Unavailable(f"session socket: {e.strerror}") from None

    def _recv(self, size):
        try:
            msg, fds, _, _ = socket.recv_fds(self.sock, size, _MAX_FDS)
        except OSError as e:
            raise Unavailable(f"session socket: {e.strerror}") from None
        return msg, fds

    def claim(self, attachment_id, token):
        """Presents an Attach token; returns Attached or raises with the daemon's reason."""
        if len(token) != abi.TOKEN_BYTES:
            raise DaqiriError("daqirid sent a token of the wrong size")
        self._send(abi.CLAIM.pack(abi.header(abi.MSG_CLAIM, abi.CLAIM.size), attachment_id, token))
        msg, fds = self._recv(abi.ERROR.size + abi.ATTACHED_GPU_SIZE)
        try:
            return self._attached(msg, fds)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise

    def _attached(self, msg, fds):
        if len(msg) < abi.HEADER.size:
            raise Unavailable("the daemon closed the session")
        mtype = abi.HEADER.unpack_from(msg)[2]
        if mtype == abi.MSG_ERROR and len(msg) == abi.ERROR.size:
            _, code, _, _, text = abi.ERROR.unpack(msg)
            raise from_code(code, text.split(b"\0", 1)[0].decode(errors="replace") or "refused")
        if mtype != abi.MSG_ATTACHED or len(msg) < abi.ATTACHED.size:
            raise DaqiriError("unexpected reply to CLAIM")
        f = abi.ATTACHED.unpack_from(msg)
        attachment_id, direction, region_count, rings_size, ring_offset, completion_offset = f[1:7]
        gpu = direction == abi.DIRECTION_GPU_RX
        tx = direction == abi.DIRECTION_TX
        rx = direction == abi.DIRECTION_RX
        if len(msg) != (abi.ATTACHED_GPU_SIZE if gpu else abi.ATTACHED.size):
            raise DaqiriError("ATTACHED has the wrong size")
        # RX and TX rings come with a kick eventfd after the regions, GPU rings with the ring's fd.
        if region_count > abi.MAX_REGIONS or len(fds) != 2 + region_count + (1 if gpu or tx or rx else 0):
            raise DaqiriError("ATTACHED carried the wrong number of fds")
        regions = []
        for i in range(region_count):
            size, buf_size, num_bufs, writable, _ = f[7 + 5 * i:12 + 5 * i]
            regions.append(RegionInfo(size, buf_size, num_bufs, writable != 0))
        a = Attached(attachment_id, direction, rings_size, ring_offset, completion_offset, regions, fds)
        if gpu:
            a.gpu = GpuRingInfo(*abi.GPU_RING_INFO.unpack_from(msg, abi.ATTACHED.size))
        return a

    def detach(self, attachment_id):
        """Ends one attachment; waits for DETACHED (or ERROR) so the daemon is done with it."""
        try:
            self._send(abi.DETACH.pack(abi.header(abi.MSG_DETACH, abi.DETACH.size), attachment_id))
            _, fds = self._recv(abi.ERROR.size)
            for fd in fds:
                os.close(fd)
        except (OSError, Unavailable):
            pass  # the session is gone: the daemon ended the attachment already


def check_abi(info):
    if info.abi_version != abi.ABI_VERSION:
        raise FailedPrecondition(f"daqirid speaks ABI {info.abi_version}, this library {abi.ABI_VERSION}")
