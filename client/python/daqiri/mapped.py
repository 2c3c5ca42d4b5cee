"""A host RX stream read by a CUDA kernel where it is (docs/gpu.md, "Mapped host rings").

    rx = client.attach_rx("stream0")                 # a host ring, full descriptors
    with daqiri.MappedRxRing(rx, device=0) as m:     # registered with CUDA for that device
        kernel(..., m.producer, m.consumer, m.descs, m.mask, m.regions[0][0], ...)

The ring, its indices and the buffers stay in the daemon's shared host memory; the kernel reads
them across PCIe and releases by storing the consumer index (`m.consumer`) itself, so the
stream's own bursts and release must not be used beside it. The addresses are device pointers
(ints), for cupy.RawKernel, numba or torch's cpp extensions. Close it before the stream.

Consumers that wait in a CUDA stream instead of spinning take batches from its relay:

    m.relay.launch(relay_stream, 8)                  # 8 relay steps, a CUDA graph
    for k in range(8):                               # 8 consumer stages (capturable)
        m.relay.wait_batch(stream, k)
        kernel(..., m.relay.batch, m.descs, ...)     # ring counters [batch[0], batch[1])
        m.relay.finish_batch(stream, k)
"""
import ctypes

import numpy as np

from . import abi, cuda
from .mapped_relay import MappedRelay
from .errors import InvalidArgument

CU_MEMHOSTREGISTER_PORTABLE = 0x01
CU_MEMHOSTREGISTER_DEVICEMAP = 0x02
CU_MEMHOSTREGISTER_READ_ONLY = 0x08
CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712

_SIGNATURES = {
    "cuMemHostRegister_v2": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint],
    "cuMemHostUnregister": [ctypes.c_void_p],
}


def _lib():
    return cuda.bind(_SIGNATURES)


class MappedRxRing:
    """Device addresses of an RX stream's ring and buffers: `producer` and `consumer` (uint32,
    host memory: read the producer with acquire at system scope, store the consumer with
    release), `descs` (`mask + 1` abi.RX_DESC), `regions` [(address, bytes)] (read-only), and
    `relay` (a MappedRelay) for consumers that wait in a stream."""

    def __init__(self, stream, device=0):
        if stream.options.compact:
            raise InvalidArgument("a mapped RX ring reads full descriptors: attach without compact")
        self._ctx = cuda.PrimaryContext(device)
        self._registered = []
        self.relay = None
        try:
            ring = stream._ring
            self._words = ring.words
            rings = self._map(stream._rings_map, False)
            header = ring.words.ctypes.data
            base = np.frombuffer(stream._rings_map, np.uint8).ctypes.data
            at = lambda host: rings + (host - base)  # noqa: E731 - same distance on the GPU's side
            self.producer = at(header + abi.WORD_PRODUCER * 4)
            self.consumer = at(header + abi.WORD_CONSUMER * 4)
            self.descs = at(ring.slots.ctypes.data)  # where the ring was checked to start
            self.mask = ring.mask
            self.regions = [(self._map(m, True), len(m)) for m in stream._maps]
            self.relay = MappedRelay(self._ctx, ring, self.producer, self.consumer)
        except BaseException:
            self.close()
            raise

    def _map(self, mm, read_only):
        """Registers one mapping (unless this process already did) and returns its device address."""
        lib = _lib()
        host = ctypes.c_void_p(np.frombuffer(mm, np.uint8).ctypes.data)
        flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP
        if read_only:
            flags |= CU_MEMHOSTREGISTER_READ_ONLY
        with self._ctx:
            r = lib.cuMemHostRegister_v2(host, len(mm), flags)
            if r == 0:
                self._registered.append(host)
            elif r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
                cuda.check(r, "cuMemHostRegister")
            device = cuda.CUdeviceptr()
            cuda.check(lib.cuMemHostGetDevicePointer_v2(ctypes.byref(device), host, 0),
                       "cuMemHostGetDevicePointer")
        return device.value

    def indices(self):
        """The ring's producer and consumer counters as the host reads them now: what the daemon
        published, and what the GPU (or the relay) gave back."""
        return int(self._words[abi.WORD_PRODUCER]), int(self._words[abi.WORD_CONSUMER])

    def close(self):
        """Stops the relay and unregisters what this object registered; the stream stays attached."""
        if self.relay is not None:
            if not self.relay.close():
                return  # its steps still read the ring's words: registrations kept
            self.relay = None
        if self._registered:
            with self._ctx:
                for host in self._registered:
                    _lib().cuMemHostUnregister(host)
            self._registered = []
        self._ctx.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
