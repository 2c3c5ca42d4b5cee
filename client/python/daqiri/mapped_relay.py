"""The relay of a mapped host ring, for consumers that wait in a CUDA stream (docs/gpu.md).

A consumer stage k waits in its stream for batch k (`wait_batch`), runs its kernels over the
ring counters [batch[0], batch[1]) and marks the batch done (`finish_batch`); the relay's steps,
launched as one CUDA graph on a stream of their own, release each finished batch to the daemon
and publish the next. The stream operations are capturable, so the stages may be a torch or
cupy CUDA graph. The step kernel is the C++ client's (cuda/src/mapped_rx_relay_kernel.cu),
shipped as PTX built with the package.
"""
import ctypes
import time
from pathlib import Path

from . import abi, cuda
from .errors import FailedPrecondition, InvalidArgument, Unavailable

_PTX = Path(__file__).with_name("mapped_relay.ptx")
_KERNEL = b"daqiri_mapped_relay_step"

CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1
CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2
CU_STREAM_WAIT_VALUE_EQ = 1
CU_EVENT_DISABLE_TIMING = 2
CU_MEMHOSTALLOC_DEVICEMAP = 2
CUDA_ERROR_NOT_READY = 600
_WORDS = 4  # RelayWords: published, taken, batch[2]
_STOP_WAIT_S = 1.0


class _MemOp(ctypes.Structure):
    """CUstreamBatchMemOpParams as a wait or write of 32 bits (the union is 48 bytes)."""
    _fields_ = [("operation", ctypes.c_int), ("address", cuda.CUdeviceptr), ("value", ctypes.c_uint64),
                ("flags", ctypes.c_uint), ("alias", cuda.CUdeviceptr), ("pad", ctypes.c_uint64)]


class _MemOpNode(ctypes.Structure):
    """CUDA_BATCH_MEM_OP_NODE_PARAMS."""
    _fields_ = [("ctx", ctypes.c_void_p), ("count", ctypes.c_uint), ("ops", ctypes.POINTER(_MemOp)),
                ("flags", ctypes.c_uint)]


class _KernelNode(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS (v2)."""
    _fields_ = [("func", ctypes.c_void_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint), ("params", ctypes.POINTER(ctypes.c_void_p)),
                ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


assert ctypes.sizeof(_MemOp) == 48 and ctypes.sizeof(_MemOpNode) == 32 and ctypes.sizeof(_KernelNode) == 72

_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_SIGNATURES = {
    "cuModuleLoadData": [_PP, ctypes.c_char_p],
    "cuModuleGetFunction": [_PP, _P, ctypes.c_char_p],
    "cuModuleUnload": [_P],
    "cuGraphCreate": [_PP, ctypes.c_uint],
    "cuGraphAddBatchMemOpNode": [_PP, _P, _PP, ctypes.c_size_t, ctypes.POINTER(_MemOpNode)],
    "cuGraphAddKernelNode_v2": [_PP, _P, _PP, ctypes.c_size_t, ctypes.POINTER(_KernelNode)],
    "cuGraphInstantiateWithFlags": [_PP, _P, ctypes.c_ulonglong],
    "cuGraphLaunch": [_P, _P],
    "cuGraphDestroy": [_P],
    "cuGraphExecDestroy": [_P],
    "cuEventCreate": [_PP, ctypes.c_uint],
    "cuEventRecord": [_P, _P],
    "cuEventQuery": [_P],
    "cuEventDestroy_v2": [_P],
    "cuMemAlloc_v2": [ctypes.POINTER(cuda.CUdeviceptr), ctypes.c_size_t],
    "cuMemFree_v2": [cuda.CUdeviceptr],
    "cuMemcpyHtoD_v2": [cuda.CUdeviceptr, _P, ctypes.c_size_t],
    "cuMemHostAlloc": [_PP, ctypes.c_size_t, ctypes.c_uint],
    "cuMemFreeHost": [_P],
    "cuStreamWaitValue32_v2": [_P, cuda.CUdeviceptr, ctypes.c_uint, ctypes.c_uint],
    "cuStreamWriteValue32_v2": [_P, cuda.CUdeviceptr, ctypes.c_uint, ctypes.c_uint],
}


def _lib():
    return cuda.bind(_SIGNATURES)


def relay_phase(k):
    """The phase stage k waits for in `published` and then writes to `taken`: (k + 1) % 2."""
    return (k + 1) & 1


class MappedRelay:
    """The relay's words in GPU memory (`published`, `taken`, `batch`: device addresses) and its
    steps. Made by MappedRxRing; `ring` is the host ring (its consumer word: where the first
    batch begins), `view` the device addresses of its producer and consumer words."""

    def __init__(self, ctx, ring, producer, consumer):
        self._ctx = ctx
        self._ring = ring
        self._producer = producer
        self._consumer = consumer
        self._words = cuda.CUdeviceptr()
        self._stop_host = ctypes.c_void_p()
        self._stop = cuda.CUdeviceptr()
        self._module = ctypes.c_void_p()
        self._exec = ctypes.c_void_p()
        self._done = ctypes.c_void_p()
        self._batches = 0
        self._stopped = False
        lib = _lib()
        with ctx:
            cuda.check(lib.cuMemAlloc_v2(ctypes.byref(self._words), _WORDS * 4), "cuMemAlloc (relay words)")
            # Stages launched before the relay's first step wait for published == 1.
            self._copy_words([0, 0, 0, 0])
            cuda.check(lib.cuMemHostAlloc(ctypes.byref(self._stop_host), 4, CU_MEMHOSTALLOC_DEVICEMAP),
                       "cuMemHostAlloc (relay stop flag)")
            ctypes.c_uint32.from_address(self._stop_host.value).value = 0
            cuda.check(lib.cuMemHostGetDevicePointer_v2(ctypes.byref(self._stop), self._stop_host, 0),
                       "cuMemHostGetDevicePointer (relay stop flag)")
            cuda.check(lib.cuEventCreate(ctypes.byref(self._done), CU_EVENT_DISABLE_TIMING),
                       "cuEventCreate (relay)")
        self.published = self._words.value
        self.taken = self._words.value + 4
        self.batch = self._words.value + 8  # [begin, end) of the batch last published

    def _copy_words(self, words, first=0):
        data = (ctypes.c_uint32 * len(words))(*words)
        cuda.check(_lib().cuMemcpyHtoD_v2(self._words.value + 4 * first, data, ctypes.sizeof(data)),
                   "cuMemcpyHtoD (relay words)")

    def launch(self, stream, batches):
        """Launches `batches` steps (even) on `stream` (a CUstream handle: cupy's `.ptr`, torch's
        `.cuda_stream`), a stream of its own, as one graph built on the first call; each later
        call takes the same count. Launch as many consumer stages as steps."""
        if self._stopped:
            raise FailedPrecondition("the ring's relay was stopped: map the stream again for another")
        if batches <= 0 or batches % 2 != 0:
            raise InvalidArgument(f"a relay launch runs an even number of batches (two phases), not {batches}")
        lib = _lib()
        with self._ctx:
            if self._batches == 0:
                start = int(self._ring.words[abi.WORD_CONSUMER])
                self._copy_words([start, start], first=2)
                self._build(lib, batches)
            elif batches != self._batches:
                raise InvalidArgument(f"the relay's graph runs {self._batches} batches a launch, not {batches}")
            cuda.check(lib.cuGraphLaunch(self._exec, ctypes.c_void_p(stream)), "cuGraphLaunch (relay)")
            cuda.check(lib.cuEventRecord(self._done, ctypes.c_void_p(stream)), "cuEventRecord (relay)")

    def _build(self, lib, batches):
        if not _PTX.is_file():
            raise FailedPrecondition(f"{_PTX.name} is not in the daqiri package: it was installed without "
                                     "nvcc (set $DAQIRI_NVCC and install it again)")
        cuda.check(lib.cuModuleLoadData(ctypes.byref(self._module), _PTX.read_bytes() + b"\0"),
                   "cuModuleLoadData (the relay's PTX; a driver older than the nvcc that built it?)")
        func = ctypes.c_void_p()
        cuda.check(lib.cuModuleGetFunction(ctypes.byref(func), self._module, _KERNEL), "cuModuleGetFunction")
        graph = ctypes.c_void_p()
        cuda.check(lib.cuGraphCreate(ctypes.byref(graph), 0), "cuGraphCreate")
        try:
            args = [ctypes.c_uint64(a) for a in (self._producer, self._consumer, self._words.value, self._stop.value)]
            params = (ctypes.c_void_p * 4)(*[ctypes.addressof(a) for a in args])
            kernel = _KernelNode(func=func.value, grid=(1, 1, 1), block=(1, 1, 1),
                                 params=ctypes.cast(params, _PP))
            last = None
            for k in range(batches):
                wait = self._memop(lib, graph, last, CU_STREAM_MEM_OP_WAIT_VALUE_32, self.taken,
                                   relay_phase(k - 1), CU_STREAM_WAIT_VALUE_EQ)
                step = ctypes.c_void_p()
                cuda.check(lib.cuGraphAddKernelNode_v2(ctypes.byref(step), graph, ctypes.byref(wait), 1,
                                                       ctypes.byref(kernel)), "cuGraphAddKernelNode (relay step)")
                last = self._memop(lib, graph, step, CU_STREAM_MEM_OP_WRITE_VALUE_32, self.published,
                                   relay_phase(k), 0)
            cuda.check(lib.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), graph, 0),
                       "cuGraphInstantiate (relay)")
        finally:
            lib.cuGraphDestroy(graph)
        self._batches = batches

    def _memop(self, lib, graph, after, operation, address, value, flags):
        op = _MemOp(operation=operation, address=address, value=value, flags=flags)
        params = _MemOpNode(ctx=self._ctx.handle.value, count=1, ops=ctypes.pointer(op), flags=0)
        node = ctypes.c_void_p()
        deps = ctypes.byref(after) if after is not None else None
        cuda.check(lib.cuGraphAddBatchMemOpNode(ctypes.byref(node), graph, deps, 0 if after is None else 1,
                                                ctypes.byref(params)), "cuGraphAddBatchMemOpNode (relay)")
        return node

    def wait_batch(self, stream, k):
        """Makes `stream` wait until the relay has published batch k."""
        with self._ctx:
            cuda.check(_lib().cuStreamWaitValue32_v2(ctypes.c_void_p(stream), self.published, relay_phase(k),
                                                     CU_STREAM_WAIT_VALUE_EQ), "cuStreamWaitValue32")

    def finish_batch(self, stream, k):
        """Marks batch k done once `stream` gets there: the relay gives it back to the daemon."""
        with self._ctx:
            cuda.check(_lib().cuStreamWriteValue32_v2(ctypes.c_void_p(stream), self.taken, relay_phase(k), 0),
                       "cuStreamWriteValue32")

    def stop(self):
        """Every step still to run publishes an empty batch at once; waits (1 s at most) for the
        steps launched, which wait for their stages. Unavailable if they do not finish."""
        if self._batches == 0 or self._stopped:
            self._stopped = True
            return
        self._stopped = True
        ctypes.c_uint32.from_address(self._stop_host.value).value = 1
        lib = _lib()
        deadline = time.monotonic() + _STOP_WAIT_S
        with self._ctx:
            while True:
                r = lib.cuEventQuery(self._done)
                if r == 0:
                    return
                if r != CUDA_ERROR_NOT_READY:
                    cuda.check(r, "waiting for the relay")
                if time.monotonic() >= deadline:
                    raise Unavailable("the relay's steps still wait for consumer stages after 1 s: launch as "
                                      "many stages as relay batches")
                time.sleep(0.0001)

    def close(self):
        """Stops the relay and frees it. False, and everything kept, if launched steps do not
        finish (freed under them, their waits would read freed memory)."""
        try:
            self.stop()
        except Unavailable:
            return False
        lib = _lib()
        with self._ctx:
            if self._exec:
                lib.cuGraphExecDestroy(self._exec)
            if self._module:
                lib.cuModuleUnload(self._module)
            if self._done:
                lib.cuEventDestroy_v2(self._done)
            if self._stop_host:
                lib.cuMemFreeHost(self._stop_host)
            if self._words:
                lib.cuMemFree_v2(self._words)
        self._exec = self._module = self._done = self._stop_host = ctypes.c_void_p()
        self._words = cuda.CUdeviceptr()
        return True
