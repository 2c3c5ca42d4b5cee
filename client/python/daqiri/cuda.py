"""The few CUDA driver calls a GPU ring needs, through ctypes on libcuda.so.1.

Nothing here makes a context current for longer than one call: each call pushes the device's
primary context and pops it again, so the caller's current device and context (torch's,
cupy's) stay as they were.
"""
import ctypes
import threading

from .errors import DaqiriError, FailedPrecondition

CUresult = ctypes.c_int
CUdeviceptr = ctypes.c_uint64

CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


_SIGNATURES = {
    "cuInit": [ctypes.c_uint],
    "cuGetErrorString": [CUresult, ctypes.POINTER(ctypes.c_char_p)],
    "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],
    "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
    "cuDeviceGetUuid_v2": [ctypes.c_char * 16, ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int],
    "cuDevicePrimaryCtxRelease_v2": [ctypes.c_int],
    "cuCtxPushCurrent_v2": [ctypes.c_void_p],
    "cuCtxPopCurrent_v2": [ctypes.POINTER(ctypes.c_void_p)],
    "cuMemImportFromShareableHandle": [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_int],
    "cuMemAddressReserve": [ctypes.POINTER(CUdeviceptr), ctypes.c_size_t, ctypes.c_size_t, CUdeviceptr,
                            ctypes.c_uint64],
    "cuMemAddressFree": [CUdeviceptr, ctypes.c_size_t],
    "cuMemMap": [CUdeviceptr, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64],
    "cuMemUnmap": [CUdeviceptr, ctypes.c_size_t],
    "cuMemSetAccess": [CUdeviceptr, ctypes.c_size_t, ctypes.POINTER(CUmemAccessDesc), ctypes.c_size_t],
    "cuMemRelease": [ctypes.c_uint64],
    "cuMemcpyDtoH_v2": [ctypes.c_void_p, CUdeviceptr, ctypes.c_size_t],
    "cuStreamSynchronize": [ctypes.c_void_p],
    "cuMemHostGetDevicePointer_v2": [ctypes.POINTER(CUdeviceptr), ctypes.c_void_p, ctypes.c_uint],
}

_lock = threading.Lock()
_lib = None


def driver():
    """libcuda with argument types set, initialised once; FailedPrecondition without a driver."""
    global _lib
    with _lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise FailedPrecondition(f"no CUDA driver (libcuda.so.1): {e}") from None
            for name, args in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.argtypes = args
                fn.restype = CUresult
            _lib = lib  # check() reads error strings through it
            try:
                check(lib.cuInit(0), "cuInit")
            except DaqiriError:
                _lib = None
                raise
        return _lib


def bind(signatures):
    """The driver with the functions of `signatures` ({name: argument types}) typed, CUresult back."""
    lib = driver()
    for name, args in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = CUresult
    return lib


def check(result, what):
    if result != 0:
        text = ctypes.c_char_p()
        msg = "unknown error"
        if _lib is not None and _lib.cuGetErrorString(result, ctypes.byref(text)) == 0 and text.value:
            msg = text.value.decode()
        raise DaqiriError(f"{what}: {msg} (CUresult {result})")


def device_by_uuid(uuid):
    """The ordinal, in this process, of the GPU whose cuDeviceGetUuid is `uuid`."""
    lib = driver()
    count = ctypes.c_int()
    check(lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    for i in range(count.value):
        dev = ctypes.c_int()
        check(lib.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
        got = (ctypes.c_char * 16)()
        check(lib.cuDeviceGetUuid_v2(got, dev), "cuDeviceGetUuid")
        if bytes(got) == bytes(uuid):
            return dev.value
    raise FailedPrecondition("the GPU holding the ring is not visible to this process "
                             "(CUDA_VISIBLE_DEVICES?)")


class PrimaryContext:
    """A retained primary context of one device; `with ctx:` makes it current for a block."""

    def __init__(self, device):
        self.device = device
        self.handle = ctypes.c_void_p()
        check(driver().cuDevicePrimaryCtxRetain(ctypes.byref(self.handle), device),
              "cuDevicePrimaryCtxRetain")

    def __enter__(self):
        check(driver().cuCtxPushCurrent_v2(self.handle), "cuCtxPushCurrent")
        return self

    def __exit__(self, *exc):
        popped = ctypes.c_void_p()
        driver().cuCtxPopCurrent_v2(ctypes.byref(popped))

    def release(self):
        if self.handle:
            driver().cuDevicePrimaryCtxRelease_v2(self.device)
            self.handle = ctypes.c_void_p()


class ImportedAllocation:
    """A VMM allocation imported from a POSIX fd, mapped read-write for one device."""

    def __init__(self, fd, size, ctx):
        lib = driver()
        self.size = size
        self.ptr = CUdeviceptr()
        handle = ctypes.c_uint64()
        with ctx:
            check(lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                  "cuMemImportFromShareableHandle")
            try:
                check(lib.cuMemAddressReserve(ctypes.byref(self.ptr), size, 0, 0, 0), "cuMemAddressReserve")
                try:
                    check(lib.cuMemMap(self.ptr, size, 0, handle, 0), "cuMemMap")
                    access = CUmemAccessDesc(CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, ctx.device),
                                             CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                    r = lib.cuMemSetAccess(self.ptr, size, ctypes.byref(access), 1)
                    if r != 0:
                        lib.cuMemUnmap(self.ptr, size)
                        check(r, "cuMemSetAccess")
                except BaseException:
                    lib.cuMemAddressFree(self.ptr, size)
                    raise
            finally:
                lib.cuMemRelease(handle)  # the mapping keeps the memory

    def unmap(self, ctx):
        if self.ptr.value:
            with ctx:
                driver().cuMemUnmap(self.ptr, self.size)
                driver().cuMemAddressFree(self.ptr, self.size)
            self.ptr = CUdeviceptr()


def copy_to_host(ctx, dst, src_ptr, size):
    """cuMemcpyDtoH of `size` bytes into the writable buffer `dst` (a numpy array)."""
    with ctx:
        check(driver().cuMemcpyDtoH_v2(dst.ctypes.data, src_ptr, size), "cuMemcpyDtoH")


def synchronize(ctx, stream):
    with ctx:
        check(driver().cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")
