"""Client: a session with daqirid, and the streams attached through it."""
import os

from . import abi
from .control import Control, pb
from .errors import DaqiriError, InvalidArgument
from .rx import RxStream
from .session import Session, check_abi
from .tx import TxStream


class Client(Control):
    """A session with daqirid plus every control call (see Control).

    with daqiri.Client(name="radio") as c:
        with c.attach_rx("stream0") as rx:
            for burst in rx:
                process(burst.payloads())

    The session ends with close(), the with block, or the process: every stream detaches and
    every buffer returns to the daemon. Not thread-safe: use one Client per thread, or lock.
    """

    def __init__(self, socket=None, name="python", timeout=5.0):
        super().__init__(socket=socket, timeout=timeout)
        self._name = name
        self._streams = []
        try:
            self._open_session()
        except BaseException:
            super().close()
            raise

    def _open_session(self):
        info = self.info()
        check_abi(info)
        self._session = Session(info.session_socket, self._name)
        self.session_id = self._session.id

    def reconnect(self):
        """After the daemon restarted (streams report detached): opens a new session and
        attaches every RX and TX stream again in place — the objects stay valid, the views of
        bursts taken before do not. GPU rings stay detached (arrays made from them may still be
        in use): attach them again. Raises what attaching raises (the flow may be gone)."""
        self._session.close()
        self._channel.close()
        self._open_channel()
        self._open_session()
        for s in list(self._streams):
            s._reattach(self)

    @property
    def connected(self):
        """False once the session's connection to the daemon broke."""
        return not self._session.broken

    def _claim(self, request):
        request.session_id = self.session_id
        resp = self._call("Attach", request)
        return self._session.claim(resp.attachment_id, resp.token)

    def _expect(self, attached, direction):
        if attached.direction != direction:
            attached.close()
            self._session.detach(attached.attachment_id)
            raise DaqiriError(f"the daemon answered with direction {attached.direction}, not {direction}")

    def attach_rx(self, flow=None, *, interface=None, queue=None, ring_size=0, block=False,
                  compact=False):
        """Packets of one flow, or of every flow of an RX queue (`interface` and `queue`, up to
        4 flows in one ring). `block`: a full ring stops the flow instead of dropping for this
        stream alone. `compact`: 16-byte descriptors (abi.RX_DESC_COMPACT), without receive
        stamps (timestamps_ns reads 0) or connection numbers; not for TCP or RDMA flows.
        Returns an RxStream."""
        req = self._rx_request(flow, interface, queue, ring_size, block)
        req.compact = compact
        a = self._claim(req)
        self._expect(a, abi.DIRECTION_RX)
        return self._keep(RxStream(self, a, req))

    def attach_tx(self, interface="", queue="", *, kick=True):
        """A TX queue of `interface` (empty `queue`: its first; neither: the queue that
        DAQIRI_TX_INTERFACE and DAQIRI_TX_QUEUE name, as in a container given one through CDI).
        Returns a TxStream. `kick`: submit() wakes the daemon's TX poller when it sleeps (one
        os.write); False keeps syscalls out of submit(), and a frame submitted to a sleeping
        daemon waits up to 1 ms."""
        if not interface and not queue:
            interface = os.environ.get("DAQIRI_TX_INTERFACE", "")
            queue = os.environ.get("DAQIRI_TX_QUEUE", "")
        # kicks: submit() kicks, so the daemon need not poll for this client while it is idle.
        req = pb.AttachRequest(tx_queue=pb.TxQueueRef(interface=interface, queue=queue), kicks=kick)
        a = self._claim(req)
        self._expect(a, abi.DIRECTION_TX)
        return self._keep(TxStream(self, a, req, kick))

    def attach_gpu_rx(self, flow, *, ring_size=0, block=False):
        """A GPU ring on one flow whose queue has a `device` or `pinned` region. Returns a
        daqiri.gpu.GpuRxRing (needs libcuda; imports nothing of CUDA until called)."""
        from .gpu import GpuRxRing
        req = self._rx_request(flow, None, None, ring_size, block)
        req.gpu = True
        a = self._claim(req)
        self._expect(a, abi.DIRECTION_GPU_RX)
        return self._keep(GpuRxRing(self, a, req))

    @staticmethod
    def _rx_request(flow, interface, queue, ring_size, block):
        req = pb.AttachRequest(ring_size=ring_size,
                               backpressure=pb.BACKPRESSURE_BLOCK if block else pb.BACKPRESSURE_DROP_NEW)
        if not flow and not interface and not queue:
            flow = os.environ.get("DAQIRI_FLOW")  # a container given one flow through CDI
        if flow:
            req.flow = flow
        elif interface and queue:
            req.rx_queue.interface = interface
            req.rx_queue.queue = queue
        else:
            raise InvalidArgument("attach_rx needs a flow, or an interface and a queue")
        return req

    def _keep(self, stream):
        self._streams.append(stream)
        return stream

    def _forget(self, stream):
        if stream in self._streams:
            self._streams.remove(stream)

    @property
    def streams(self):
        return list(self._streams)

    def close(self):
        """Ends the session: every stream detaches, every buffer returns."""
        for s in list(self._streams):
            s.close()
        self._session.close()
        super().close()
