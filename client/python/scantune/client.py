"""Client: one gRPC channel to scantuned and a method per RPC a training job
or an engineer uses. Thread-safe as its channel is (gRPC channels are)."""

import os
import socket
import sys

import grpc

# The stubs protoc generates import each other as top-level modules.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_gen"))
import scantune_pb2 as pb  # noqa: E402
import scantune_pb2_grpc as pb_grpc  # noqa: E402

DEFAULT_ADDRESS = "unix:///tmp/scantune.sock"
_DTYPES = {"fp32": pb.FP32, "bf16": pb.BF16, "fp16": pb.FP16}
_MODES = {"fwd": pb.FWD, "bwd": pb.BWD, "fwd_bwd": pb.FWD_BWD}
_MISS = {"not_found": pb.NOT_FOUND, "nearest": pb.NEAREST, "tune": pb.TUNE_NOW}


class ScantuneError(Exception):
    """A request the daemon refused or could not serve: `code` is the gRPC
    status code's name ("NOT_FOUND", "INVALID_ARGUMENT", "FAILED_PRECONDITION",
    ...), `message` the daemon's reason."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _shape(shape):
    if isinstance(shape, str):
        parts = shape.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"shape {shape!r}: expected BxLxW, e.g. 4x2048x2048")
        shape = tuple(int(p) for p in parts)
    batch, length, width = shape
    return pb.Shape(batch=batch, length=length, width=width)


def _lookup(table, value, what):
    if value not in table:
        raise ValueError(f"{what} {value!r}: one of {', '.join(table)}")
    return table[value]


def problem(op, shape, dtype, mode, *, h0=False, state=0, delta_bias=False, delta_softplus=False, z_gate=False):
    """A Problem message: op "linear_scan" | "rglru" | "samu" | "selective_scan",
    shape "BxLxW" or (B, L, W), dtype "fp32" | "bf16" | "fp16", mode "fwd" |
    "bwd" | "fwd_bwd"; selective_scan's state N and options."""
    return pb.Problem(op=op, shape=_shape(shape), dtype=_lookup(_DTYPES, dtype, "dtype"),
                      mode=_lookup(_MODES, mode, "mode"), has_h0=h0, state_dim=state, delta_bias=delta_bias,
                      delta_softplus=delta_softplus, z_gate=z_gate)


def _first_token(path):
    """The first token line of a token file (blank and '#' lines skipped), as scantuned reads its own."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                return line
    raise ValueError(f"token file {path!r} holds no token")


class Client:
    def __init__(self, address=None, timeout_s=60.0, client_id=None, *, tls_ca=None, token=None, token_file=None):
        """address: "unix:///path", "unix:path" or "HOST:PORT" (default
        $SCANTUNE_ADDRESS, else unix:///tmp/scantune.sock). timeout_s bounds
        each unary call (not Tune, nor a select or get_kernel that may tune,
        which last as long as the job). client_id: who this client is to the
        daemon's per-client job bound (default "host:pid").
        A daemon beyond the host (scantuned --tls-cert ... --token-file ...):
        tls_ca is the PEM file of the CA that signed its certificate (default
        $SCANTUNE_TLS_CA), token the bearer token sent with every call, or
        token_file a file whose first token line it is (default
        $SCANTUNE_TOKEN_FILE). A token is never sent without TLS."""
        self.address = address or os.environ.get("SCANTUNE_ADDRESS") or DEFAULT_ADDRESS
        self.timeout_s = timeout_s
        self.client_id = client_id or f"{socket.gethostname()}:{os.getpid()}"
        self._metadata = (("scantune-client", self.client_id),)
        tls_ca = tls_ca or os.environ.get("SCANTUNE_TLS_CA")
        token_file = token_file or os.environ.get("SCANTUNE_TOKEN_FILE")
        if not token and token_file:
            token = _first_token(token_file)
        if token and not tls_ca:
            raise ValueError("a token is sent only over TLS: give the daemon's CA certificate too "
                             "(tls_ca or $SCANTUNE_TLS_CA)")
        self.tls = bool(tls_ca)
        if tls_ca:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            if token:
                credentials = grpc.composite_channel_credentials(credentials,
                                                                 grpc.access_token_call_credentials(token))
            self._channel = grpc.secure_channel(self.address, credentials)
        else:
            self._channel = grpc.insecure_channel(self.address)
        self._stub = pb_grpc.ScantuneStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, long_running=False):
        try:
            return method(request, timeout=None if long_running else self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            raise ScantuneError(e.code().name, e.details()) from None

    def devices(self):
        """The daemon's GPUs (DeviceInfo messages); none where it has no GPU."""
        return list(self._call(self._stub.ListDevices, pb.ListDevicesRequest()).devices)

    def select(self, op, shape, dtype, mode, *, deterministic=False, on_miss="not_found", device_uuid="",
               **problem_options):
        """The selection (Selection message) for the problem on the device:
        the fastest legal variant, or with deterministic=True the fastest of
        those whose outputs have the same bits every run. on_miss: "not_found"
        (raise), "nearest" (the nearest tuned shape, flagged) or "tune"."""
        request = pb.SelectRequest(problem=problem(op, shape, dtype, mode, **problem_options), device_uuid=device_uuid,
                                   on_miss=_lookup(_MISS, on_miss, "on_miss"), deterministic=deterministic)
        return self._call(self._stub.Select, request, long_running=on_miss == "tune").selection

    def get_kernel(self, op, shape, dtype, mode, *, variant="", deterministic=False, on_miss="not_found",
                   device_uuid="", **problem_options):
        """The compiled kernel (KernelResponse: cubin, launches in order,
        parameter layout, workspace) of `variant`, or of the selection when
        variant is empty."""
        request = pb.GetKernelRequest(problem=problem(op, shape, dtype, mode, **problem_options), variant=variant,
                                      device_uuid=device_uuid, on_miss=_lookup(_MISS, on_miss, "on_miss"),
                                      deterministic=deterministic)
        return self._call(self._stub.GetKernel, request, long_running=on_miss == "tune")

    def tune(self, op, shape, dtype, mode, *, variants=(), force=False, skip_unfit=False, device_uuid="",
             progress=None, **problem_options):
        """Tunes the problem now and returns its (ordinary) selection. Every
        TuneProgress message goes to progress(message) as it arrives."""
        request = pb.TuneRequest(problem=problem(op, shape, dtype, mode, **problem_options), device_uuid=device_uuid,
                                 variants=list(variants), force=force, skip_unfit=skip_unfit)
        selection = None
        try:
            for message in self._stub.Tune(request, metadata=self._metadata):
                if progress is not None:
                    progress(message)
                if message.stage == pb.TuneProgress.DONE and message.HasField("selection"):
                    selection = message.selection
        except grpc.RpcError as e:
            raise ScantuneError(e.code().name, e.details()) from None
        if selection is None:
            raise ScantuneError("INTERNAL", "the tune stream ended without a DONE update carrying the selection")
        return selection

    def records(self, *, op="", variant="", state="", origin="", device_model="", page_size=100):
        """Every stored record matching the filter (Record messages), newest
        first (by id), fetched a page at a time."""
        state_value = pb.ResultState.Value(state) if state else pb.STATE_UNSPECIFIED
        flt = pb.RecordFilter(op=op, variant=variant, state=state_value, origin=origin, device_model=device_model)
        yield from self._pages(self._stub.ListRecords, "records",
                               lambda token: pb.ListRecordsRequest(filter=flt, page_size=page_size, page_token=token))

    def selections(self, *, op="", shape=None, dtype="", mode="", variant="", device_model="",
                   deterministic_only=False, history=False, page_size=100):
        """Every stored selection matching the filter (Selection messages, the
        ordinary and the deterministic ones, each flagged stale as select()
        flags it), in the order they were first made, a page at a time.
        history=True: every decision ever made instead, newest first, those a
        later one replaced flagged superseded."""
        flt = pb.RecordFilter(op=op, variant=variant, device_model=device_model,
                              dtype=_lookup(_DTYPES, dtype, "dtype") if dtype else pb.DTYPE_UNSPECIFIED,
                              mode=_lookup(_MODES, mode, "mode") if mode else pb.MODE_UNSPECIFIED)
        if shape is not None:
            flt.shape.CopyFrom(_shape(shape))
        yield from self._pages(self._stub.ListSelections, "selections",
                               lambda token: pb.ListSelectionsRequest(filter=flt, deterministic_only=deterministic_only,
                                                                      history=history, page_size=page_size,
                                                                      page_token=token))

    def _pages(self, rpc, field, request_for):
        """The items of a paged listing: request_for(token) asks for a page,
        `field` names its repeated items."""
        token = ""
        while True:
            reply = self._call(rpc, request_for(token))
            yield from getattr(reply, field)
            token = reply.next_page_token
            if not token:
                return

    def record(self, record_id):
        """One record, every field (Record message)."""
        return self._call(self._stub.GetRecord, pb.GetRecordRequest(id=record_id))
