"""daqiri: receive and send packets through daqirid, zero-copy.

    import daqiri
    with daqiri.Client() as c, c.attach_rx("stream0") as rx:
        for burst in rx:                 # released when the loop moves on
            data = burst.payloads()      # packets x bytes, a read-only view of the daemon's buffers

GPU rings (daqiri.gpu) come as arrays with __cuda_array_interface__ and DLPack, for torch and
cupy; MappedRxRing hands a host ring to a CUDA kernel that reads it where it is. docs/python.md has the whole API.
"""
from . import abi, frames
from .client import Client
from .control import Control
from .errors import (AlreadyExists, DaqiriError, Detached, FailedPrecondition, InvalidArgument,
                     NotFound, PermissionDenied, ResourceExhausted, Unavailable)
from .mapped import MappedRxRing
from .mapped_relay import MappedRelay, relay_phase
from .rx import Batch, Burst, Packet, RxStream, batch_of
from .tx import TxBuffer, TxStream

__version__ = "0.1.0"

__all__ = ["abi", "frames", "Client", "Control", "Batch", "Burst", "MappedRelay", "MappedRxRing", "Packet",
           "RxStream", "batch_of", "relay_phase", "TxBuffer", "TxStream", "DaqiriError", "AlreadyExists", "Detached", "FailedPrecondition",
           "InvalidArgument", "NotFound", "PermissionDenied", "ResourceExhausted", "Unavailable"]
