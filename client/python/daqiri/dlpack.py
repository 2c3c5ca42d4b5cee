"""DLPack export of device memory (the capsule protocol of __dlpack__), in ctypes.

The DLManagedTensor and the shapes live in a holder kept in _LIVE until the consumer calls the
deleter (torch.from_dlpack, cupy.from_dlpack), or until an unconsumed capsule is collected.
"""
import ctypes

kDLCUDA = 2
kDLUInt = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]

_NAME = b"dltensor"
_LIVE = {}  # address of a DLManagedTensor -> (tensor, shape, strides, owner)

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_DELETER
def _deleter(managed):
    _LIVE.pop(ctypes.addressof(managed.contents), None)


# The capsule arrives as a raw pointer: it is being deallocated, and a py_object argument
# would take a reference to it.
@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # Still named "dltensor": nobody consumed it, so its deleter was never called.
    if _capsule_is_valid(capsule, _NAME):
        _LIVE.pop(_capsule_pointer(capsule, _NAME), None)


def capsule(ptr, shape, strides, device_id, owner):
    """A "dltensor" capsule of uint8 device memory at `ptr`; strides in elements (bytes)."""
    ndim = len(shape)
    c_shape = (ctypes.c_int64 * ndim)(*shape)
    c_strides = (ctypes.c_int64 * ndim)(*strides)
    t = DLManagedTensor()
    t.dl_tensor = DLTensor(ptr, DLDevice(kDLCUDA, device_id), ndim, DLDataType(kDLUInt, 8, 1),
                           c_shape, c_strides, 0)
    t.manager_ctx = None
    t.deleter = _deleter
    address = ctypes.addressof(t)
    _LIVE[address] = (t, c_shape, c_strides, owner)
    return _capsule_new(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))
