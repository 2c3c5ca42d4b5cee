"""The control API (daqiri.v1.Control over gRPC): everything daqiri-ctl does, as methods.

Results are the protobuf messages of proto/daqiri/v1/control.proto (google.protobuf.json_format
turns them into dicts); errors are daqiri.errors exceptions carrying the daemon's reason.
"""
import ipaddress
import os

import grpc

from .errors import from_rpc
from .v1 import control_pb2 as pb
from .v1 import control_pb2_grpc as pb_grpc

DEFAULT_SOCKET = "/run/daqiri/daqiri.sock"


def default_socket():
    return os.environ.get("DAQIRI_SOCKET") or DEFAULT_SOCKET


def _port_range(value):
    if value is None:
        return None
    first, last = (value, value) if isinstance(value, int) else value
    return pb.PortRange(first=first, last=last)


def _prefix(value):
    if value is None:
        return None
    net = ipaddress.IPv4Network(value)  # host bits after the prefix: ValueError, not dropped
    return pb.Ipv4Prefix(address=str(net.network_address), prefix_length=net.prefixlen)


def _health_request(_):
    return b""  # grpc.health.v1.HealthCheckRequest{service: ""}


def _health_status(data):
    # HealthCheckResponse{status = 1 (varint)}: 1 SERVING, 2 NOT_SERVING; absent means 0.
    return data[1] if len(data) >= 2 and data[0] == 0x08 else 0


class Control:
    """A connection to daqirid's control socket. `socket`: a Unix socket path (default
    $DAQIRI_SOCKET, else /run/daqiri/daqiri.sock); or `target` ("host:port") with TLS
    `credentials` (grpc.ssl_channel_credentials) for the daemon's TCP listener."""

    def __init__(self, socket=None, timeout=5.0, target=None, credentials=None):
        self.timeout = timeout
        if target is not None and credentials is None:
            raise ValueError("daqirid's TCP listener is TLS only: pass credentials")
        self._target = target
        self._credentials = credentials
        if target is None:
            self.socket = socket or default_socket()
        self._open_channel()

    def _open_channel(self):
        # Also after the daemon restarted: a channel that saw it go waits out gRPC's reconnect
        # backoff (a second, then longer each time) before it tries again.
        if self._target is not None:
            self._channel = grpc.secure_channel(self._target, self._credentials)
        else:
            self._channel = grpc.insecure_channel("unix:" + self.socket)
        self._stub = pb_grpc.ControlStub(self._channel)
        self._health = self._channel.unary_unary("/grpc.health.v1.Health/Check",
                                                 request_serializer=_health_request,
                                                 response_deserializer=_health_status)

    def _call(self, method, request):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise from_rpc(e) from None

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        """Version, build features, backends, GPUs, hugepages, and who the daemon thinks you are."""
        return self._call("GetInfo", pb.GetInfoRequest())

    def interfaces(self):
        return list(self._call("ListInterfaces", pb.ListInterfacesRequest()).interfaces)

    def regions(self):
        return list(self._call("ListMemoryRegions", pb.ListMemoryRegionsRequest()).regions)

    def queues(self, interface=""):
        return list(self._call("ListQueues", pb.ListQueuesRequest(interface=interface)).queues)

    def flows(self, interface=""):
        return list(self._call("ListFlows", pb.ListFlowsRequest(interface=interface)).flows)

    def sessions(self):
        return list(self._call("ListSessions", pb.ListSessionsRequest()).sessions)

    def stats(self):
        """Counters of flows, attachments and NICs (a daqiri.v1.Stats)."""
        return self._call("GetStats", pb.GetStatsRequest())

    def flow_stats(self, name):
        """The FlowStats of one flow, or None."""
        return next((f for f in self.stats().flows if f.name == name), None)

    def create_flow(self, name, interface, queue="", *, udp_dst=None, udp_src=None,
                    ipv4_src=None, ipv4_dst=None, tcp_dst=None, any=False, connect="",
                    allow_block=False):
        """Adds a flow (admin role). Ports: a number or a (first, last) pair; addresses:
        "10.0.0.0/8" or "10.0.0.5". allow_block: True (any client may attach with block=True),
        a list of user names, or False. Returns the Flow with its id and steering."""
        match = pb.FlowMatch(udp_dst=_port_range(udp_dst), udp_src=_port_range(udp_src),
                             ipv4_src=_prefix(ipv4_src), ipv4_dst=_prefix(ipv4_dst),
                             tcp_dst=_port_range(tcp_dst), any=any)
        users = [] if isinstance(allow_block, bool) else list(allow_block)
        req = pb.CreateFlowRequest(name=name, interface=interface, queue=queue, connect=connect,
                                   allow_block=allow_block is True, allow_block_users=users)
        if not connect:
            req.match.CopyFrom(match)
        return self._call("CreateFlow", req)

    def delete_flow(self, name):
        """Removes a flow (admin role); its attachments end."""
        self._call("DeleteFlow", pb.DeleteFlowRequest(name=name))

    _CAPTURE_FORMATS = {"pcap": pb.CAPTURE_FORMAT_PCAP, "pcapng": pb.CAPTURE_FORMAT_PCAPNG,
                        "raw": pb.CAPTURE_FORMAT_RAW}

    def start_capture(self, flow, path, *, rx_queue=None, format="pcap", max_packets=0,
                      max_seconds=0.0, snaplen=0, rotate_bytes=0):
        """Has the daemon record `flow` (or, with flow="" and rx_queue=(interface, queue), every
        flow of an RX queue) to `path` (absolute, inside daemon.capture_dirs); the file belongs
        to the caller. Returns the Capture message (its `id` for stop_capture)."""
        if format not in self._CAPTURE_FORMATS:
            raise ValueError("format is pcap, pcapng or raw")
        req = pb.StartCaptureRequest(
            flow=flow, path=path, format=self._CAPTURE_FORMATS[format], max_packets=max_packets,
            max_seconds=max_seconds, snaplen=snaplen, rotate_bytes=rotate_bytes)
        if rx_queue is not None:
            req.rx_queue.interface, req.rx_queue.queue = rx_queue
        return self._call("StartCapture", req)

    def stop_capture(self, capture_id):
        """Ends a capture (the caller's own; an admin's: any) and returns its final state."""
        return self._call("StopCapture", pb.StopCaptureRequest(id=capture_id))

    def captures(self):
        """The daemon's captures, running and recently ended."""
        return list(self._call("ListCaptures", pb.ListCapturesRequest()).captures)

    def health(self):
        """True when the daemon answers grpc.health.v1 with SERVING."""
        try:
            return self._health(b"", timeout=self.timeout) == 1
        except grpc.RpcError:
            return False
