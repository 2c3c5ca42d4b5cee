"""GPU rings: a flow's packets in GPU memory, as device arrays torch and cupy take without a copy.

    ring = client.attach_gpu_rx("stream0")
    for burst in ring:                              # released when the loop moves on
        x = torch.from_dlpack(burst.payloads())     # or torch.as_tensor(..., device="cuda"),
        ...                                         # cupy.asarray(burst.payloads())

The ring is imported from the daemon's CUDA VMM fd and mapped for the GPU that holds it (found
by UUID) through that device's primary context, pushed and popped around each driver call, so
the caller's current device and context are left as they were. Waiting happens on the host
(the daemon mirrors the producer index into host memory once a copy is complete): whatever a
burst names is in GPU memory before wait_burst() returns it, so no stream synchronisation is
needed to read it. Release a burst only after the work reading it is done (release(burst,
stream=...) synchronises a stream first).
"""
import os

import numpy as np

from . import abi, cuda, dlpack, frames
from .errors import DaqiriError
from .ring import Ring
from .rx import map_fd
from .stream import ReceiveStream


class DeviceArray:
    """uint8 device memory with a shape: __cuda_array_interface__ (v3) and DLPack.

    Keeps its ring mapped while it (or a tensor made from it) lives."""

    def __init__(self, owner, ptr, shape, strides=None):
        self._owner = owner
        self.ptr = ptr
        self.shape = tuple(shape)
        self.strides = tuple(strides) if strides else _contiguous(self.shape)
        self.device = owner.device

    @property
    def __cuda_array_interface__(self):
        # stream None: the data is complete before the array exists (see the module's doc).
        return {"shape": self.shape, "typestr": "|u1", "data": (self.ptr, False), "version": 3,
                "strides": self.strides, "stream": None}

    def __dlpack__(self, stream=None, **_):
        # `stream`, `max_version`, `dl_device`, `copy`: the data is complete and on the device
        # already, so none changes what we hand out (an unversioned "dltensor" capsule).
        return dlpack.capsule(self.ptr, self.shape, self.strides, self.device, self._owner)

    def __dlpack_device__(self):
        return (dlpack.kDLCUDA, self.device)

    def __len__(self):
        return self.shape[0]

    def copy_to_host(self):
        """A numpy copy (for checks and debugging; contiguous arrays only)."""
        if self.strides != _contiguous(self.shape):
            raise ValueError("copy_to_host takes contiguous arrays")
        out = np.empty(self.shape, np.uint8)
        if out.size:
            cuda.copy_to_host(self._owner._ctx, out, self.ptr, out.size)
        return out


# Enough of a frame for its Ethernet, VLAN, IPv4 (options included) and UDP headers.
_HEADER_BYTES = 128


def _contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class GpuBurst:
    """Slots [first, first + count) of a GPU ring; never spans the ring's end. Frame i starts
    at byte 0 of row i of `frames`; its UDP payload at descriptors[i]["payload_offset"]."""

    __slots__ = ("_ring", "first", "count", "frames", "_desc")

    def __init__(self, ring, first, count):
        self._ring = ring
        self.first = first
        self.count = count
        self.frames = DeviceArray(ring, ring.slot_ptr(first & ring.mask), (count, ring.slot_size))
        self._desc = None

    def __len__(self):
        return self.count

    def __bool__(self):
        return self.count != 0

    @property
    def descriptors(self):
        """The burst's daqiri_rx_desc (abi.RX_DESC), copied to the host on first use."""
        if self._desc is None:
            self._desc = np.empty(self.count, abi.RX_DESC)
            if self.count:
                r = self._ring
                cuda.copy_to_host(r._ctx, self._desc.view(np.uint8), r.desc_ptr(self.first & r.mask),
                                  self.count * abi.RX_DESC.itemsize)
                self._find_payloads()
        return self._desc

    def _find_payloads(self):
        # Whole frames nobody read to steer them come with payload_offset PAYLOAD_UNREAD (the
        # daemon reads no frame bound for a GPU): look in their headers, copied over here.
        r = self._ring
        head = np.empty(_HEADER_BYTES, np.uint8)
        for i in np.flatnonzero(self._desc["payload_offset"] == abi.PAYLOAD_UNREAD):
            n = min(int(self._desc["length"][i]), _HEADER_BYTES, r.slot_size)
            cuda.copy_to_host(r._ctx, head, self.frames.ptr + int(i) * r.slot_size, n)
            self._desc["payload_offset"][i] = frames.udp_payload_offset(head[:n])

    @property
    def lengths(self):
        return self.descriptors["length"]

    @property
    def headers(self):
        """Header-data split: count x header_size, the first bytes of each frame (a view of the
        host header slots; the rest of frame i is row i of `frames`). None without a split."""
        r = self._ring
        if r._headers is None:
            return None
        start = self.first & r.mask
        return r._headers[start:start + self.count]

    def payloads(self):
        """The UDP payloads as a packets x bytes device array (a strided view of the slots);
        the packets must share a size and payload offset (ValueError otherwise)."""
        if self.count == 0:
            return DeviceArray(self._ring, self.frames.ptr, (0, 0))
        d = self.descriptors
        po, ln = d["payload_offset"], d["length"]
        if (po != po[0]).any() or (ln != ln[0]).any() or not 0 < po[0] <= ln[0] <= self._ring.slot_size:
            raise ValueError("the packets of this burst differ in size or layout: use frames and descriptors")
        return DeviceArray(self._ring, self.frames.ptr + int(po[0]), (self.count, int(ln[0] - po[0])),
                           (self._ring.slot_size, 1))


class GpuRxRing(ReceiveStream):
    """One flow's packets in a ring in GPU memory (Client.attach_gpu_rx)."""

    def __init__(self, client, attached, options):
        self._mem = None
        self._ctx = None
        self._headers = None
        self._headers_map = None
        try:
            g = attached.gpu
            if g.size == 0 or g.size & (g.size - 1) or g.slot_size == 0 or \
                    g.payload_offset + g.size * g.slot_size > g.alloc_size or \
                    g.desc_offset + g.size * abi.RX_DESC.itemsize > g.alloc_size:
                raise DaqiriError("the daemon's GPU ring does not check out")
            self.info = g
            self._control_map = map_fd(attached.fds[0], attached.rings_size, True)
            self._ring = Ring(self._control_map, attached.ring_offset, attached.rings_size, abi.RING_GPU, None)
            if self._ring.size != g.size:
                raise DaqiriError("the GPU ring's control block and its info disagree")
            self.device = cuda.device_by_uuid(g.device_uuid)
            self._ctx = cuda.PrimaryContext(self.device)
            # Header-data split: one region, the header slots; the ring's fd comes after it.
            if len(attached.regions) != (1 if g.header_size else 0):
                raise DaqiriError("the daemon's GPU ring and its header slots disagree")
            if g.header_size:
                h = attached.regions[0]
                if h.buf_size != g.header_size or h.num_bufs != g.size or h.size < g.size * g.header_size:
                    raise DaqiriError("the daemon's header slots do not check out")
                self._headers_map = map_fd(attached.fds[2], h.size, False)
                self._headers = np.frombuffer(self._headers_map, np.uint8, g.size * g.header_size)\
                    .reshape(g.size, g.header_size)
            self._mem = cuda.ImportedAllocation(attached.fds[2 + len(attached.regions)], g.alloc_size,
                                                self._ctx)
            self.options = options
            self._adopt(client, attached)
        except BaseException:
            self._unmap()
            client._session.detach(attached.attachment_id)
            raise
        finally:
            attached.close()
        self.size = g.size
        self.mask = g.size - 1
        self.slot_size = g.slot_size
        self.header_size = g.header_size

    def header(self, counter):
        """Header-data split: the first header_size bytes of ring counter `counter`'s frame (host
        memory, read-only; valid until released). None without a split."""
        return None if self._headers is None else self._headers[counter & self.mask]

    # Device addresses.
    @property
    def base(self):
        return self._mem.ptr.value

    def slot_ptr(self, i):
        return self.base + self.info.payload_offset + i * self.slot_size

    def desc_ptr(self, i):
        return self.base + self.info.desc_offset + i * abi.RX_DESC.itemsize

    @property
    def doorbell_ptr(self):
        return self.base + self.info.doorbell_offset

    @property
    def slots(self):
        """Every payload slot, size x slot_size, as one device array."""
        return DeviceArray(self, self.slot_ptr(0), (self.size, self.slot_size))

    @property
    def descriptor_bytes(self):
        """Every descriptor (size x 32 bytes of abi.RX_DESC) in device memory, for kernels of your own."""
        return DeviceArray(self, self.desc_ptr(0), (self.size, abi.RX_DESC.itemsize))

    @property
    def producer(self):
        """The producer index as of the last copy the daemon saw complete."""
        return self._ring.producer

    def _burst(self, first, start, n):
        return GpuBurst(self, first, n)

    def _reattach(self, client):
        # Arrays made from the old ring may still be in use: it is not replaced under them.
        client._forget(self)
        if self._eventfd >= 0:
            os.close(self._eventfd)
            self._eventfd = -1

    def release(self, burst, stream=None):
        """Gives the burst's slots (and earlier ones) back. `stream`: a CUDA stream (an int,
        or a torch/cupy stream object) whose work on the slots must finish first."""
        if burst._ring is not self:
            raise ValueError("not a burst of this ring")
        if stream is not None:
            handle = getattr(stream, "cuda_stream", None) or getattr(stream, "ptr", None) or int(stream)
            cuda.synchronize(self._ctx, handle)
        self._release_to((burst.first + burst.count) & 0xFFFFFFFF)

    def _unmap(self):
        # The header slots' mapping goes with the last view of it (numpy arrays may hold it).
        self._headers = None
        self._headers_map = None
        if self._mem is not None:
            self._mem.unmap(self._ctx)
            self._mem = None
        if self._ctx is not None:
            self._ctx.release()
            self._ctx = None

    def __del__(self):
        # close() detaches; the mapping stays while arrays made from it live. At interpreter
        # exit the driver may be gone already: the process's end unmaps then.
        try:
            self._unmap()
        except Exception:
            pass
