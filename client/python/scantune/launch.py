"""Launching a served kernel (a KernelResponse from Client.get_kernel) on the
job's own device memory: the Python twin of the C++ KernelLauncher
(client/kernel_launcher.h), under the contract of README.md, "Launching a
served kernel yourself".

    kernel = scantune.Client().get_kernel("rglru", "4x2048x2048", "bf16", "fwd_bwd")
    with scantune.LoadedKernel(kernel) as k:          # after torch.cuda.init()
        k.run("fwd", {"x": x, "ga": ga, ...}, stream=torch.cuda.current_stream())

libcuda.so.1 is loaded with ctypes on first use, never at import, so the
package imports on machines without a driver. Packing (pack_params) needs no
driver at all. Driver failures raise ScantuneError whose code is the
CUresult's name (cuGetErrorName, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS"); bad
arguments raise it with "INVALID_ARGUMENT", a missing driver with
"FAILED_PRECONDITION".
"""

import contextlib
import ctypes
from ctypes import POINTER, byref, c_char, c_char_p, c_int, c_size_t, c_ubyte, c_uint, c_uint64, c_void_p

from scantune.client import ScantuneError

LIBCUDA = "libcuda.so.1"
MIN_WORKSPACE_BYTES = 256  # never null: a workspace field need not accept null

# cuda.h (CUDA 12 and 13).
_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
_FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14
_CARVEOUT_MAX_SHARED = 100
_LAUNCH_CLUSTER_DIMENSION = 4
_LAUNCH_PROGRAMMATIC_STREAM_SERIALIZATION = 6
_PORTABLE_CLUSTER = 8


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", c_uint), ("y", c_uint), ("z", c_uint)]


class _LaunchAttributeValue(ctypes.Union):  # CUlaunchAttributeValue: 64 bytes, 8-byte aligned
    _fields_ = [("pad", c_uint64 * 8), ("clusterDim", _ClusterDim), ("programmaticStreamSerializationAllowed", c_int)]


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: {id; pad[4]; value}
    _fields_ = [("id", c_int), ("pad", c_char * 4), ("value", _LaunchAttributeValue)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
                ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint),
                ("sharedMemBytes", c_uint), ("hStream", c_void_p),
                ("attrs", POINTER(_LaunchAttribute)), ("numAttrs", c_uint)]


# Symbol names as cuda.h maps them (cuMemAlloc -> cuMemAlloc_v2, ...); every one returns a CUresult.
_PROTOTYPES = {
    "cuInit": [c_uint],
    "cuGetErrorName": [c_int, POINTER(c_char_p)],
    "cuGetErrorString": [c_int, POINTER(c_char_p)],
    "cuCtxGetCurrent": [POINTER(c_void_p)],
    "cuCtxSetCurrent": [c_void_p],
    "cuCtxPushCurrent_v2": [c_void_p],
    "cuCtxPopCurrent_v2": [POINTER(c_void_p)],
    "cuCtxSynchronize": [],
    "cuDeviceGet": [POINTER(c_int), c_int],
    "cuDevicePrimaryCtxRetain": [POINTER(c_void_p), c_int],
    "cuDevicePrimaryCtxRelease_v2": [c_int],
    "cuModuleLoadData": [POINTER(c_void_p), c_char_p],
    "cuModuleUnload": [c_void_p],
    "cuModuleGetFunction": [POINTER(c_void_p), c_void_p, c_char_p],
    "cuFuncSetAttribute": [c_void_p, c_int, c_int],
    "cuMemAlloc_v2": [POINTER(c_uint64), c_size_t],
    "cuMemFree_v2": [c_uint64],
    "cuMemsetD8Async": [c_uint64, c_ubyte, c_size_t, c_void_p],
    "cuLaunchKernelEx": [POINTER(_LaunchConfig), c_void_p, POINTER(c_void_p), POINTER(c_void_p)],
}
_drivers = {}


def _invalid(message):
    return ScantuneError("INVALID_ARGUMENT", message)


def load_driver(library=LIBCUDA):
    """The CUDA driver (ctypes.CDLL of `library`, prototypes set, cuInit
    done), loaded once. FAILED_PRECONDITION when it cannot be loaded or is
    older than CUDA 12 (no cuLaunchKernelEx)."""
    if library in _drivers:
        return _drivers[library]
    try:
        lib = ctypes.CDLL(library)
        for name, argtypes in _PROTOTYPES.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = c_int, argtypes
    except (OSError, AttributeError) as e:
        raise ScantuneError("FAILED_PRECONDITION", f"cannot load the CUDA driver ({library}): {e}; launching a "
                            "served kernel needs the NVIDIA driver of CUDA 12 or later") from None
    _check(lib, lib.cuInit(0), "cuInit")
    _drivers[library] = lib
    return lib


def _check(lib, result, call):
    if result == 0:
        return
    name, text = c_char_p(), c_char_p()
    lib.cuGetErrorName(result, byref(name))
    lib.cuGetErrorString(result, byref(text))
    code = name.value.decode() if name.value else f"CUresult {result}"
    raise ScantuneError(code, f"{call}: {text.value.decode() if text.value else 'unknown error'}")


def field_allows_null(field):
    """True when the ParamField's meaning accepts a null pointer ("...; null:
    zero", "optional"), as the C++ FieldAllowsNull decides."""
    meaning = field.meaning.lower()
    return "null" in meaning or "optional" in meaning


def _address(value, where):
    """A pointer value as a device address: None is null, a tensor its
    data_ptr(), an int the address itself."""
    if value is None:
        return 0
    if hasattr(value, "data_ptr"):
        if getattr(value, "is_cuda", True) is False:
            raise _invalid(f"{where} got a tensor in host memory; the kernel reads device memory")
        if hasattr(value, "is_contiguous") and not value.is_contiguous():
            raise _invalid(f"{where} got a non-contiguous tensor; the kernels read dense row-major (B, L, W) memory")
        return int(value.data_ptr())
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{where} is a pointer: pass a tensor, a device address (int) or None, "
                       f"not {type(value).__name__}")
    if not 0 <= value < 1 << 64:
        raise _invalid(f"{where} cannot hold the address {value}")
    return value


def check_served_sizes(kernel, values):
    """The sizes among `values` (batch, length, width; selective_scan's dim
    and state) against the problem the kernel was served for (the
    response's `problem`): its launches cover that shape only, and a `_k1`
    kernel has it compiled in, so other sizes would read and write outside
    the caller's tensors. INVALID_ARGUMENT naming the field and both values.
    Nothing to check without a problem (a daemon from before the field) or
    where a size is not given (pack_params names those)."""
    if not kernel.HasField("problem"):
        return
    p = kernel.problem
    ssm = p.op == "selective_scan"
    served = {"batch": p.shape.batch, "length": p.shape.length, "dim" if ssm else "width": p.shape.width}
    if ssm:
        served["state"] = p.state_dim or 16
    for name, want in served.items():
        got = values.get(name)
        if isinstance(got, int) and not isinstance(got, bool) and got != want:
            raise _invalid(f"parameter field '{name}' is {got}, but backend {kernel.variant} was served for {p.op} "
                           f"{p.shape.batch}x{p.shape.length}x{p.shape.width} ({name} {want}): its launches cover "
                           f"that shape only; ask get_kernel for this one")


def pack_params(kernel, values):
    """The by-value parameter struct of `kernel` (a KernelResponse) as
    params_size_bytes bytes, packed BY FIELD NAME from its served layout:
    `values` maps every field name to a tensor (anything with .data_ptr()),
    a device address or integer (int), or None (a null pointer, only where
    the field's meaning allows it); unnamed padding is zero. A None for a name
    the layout lacks is ignored (nothing to null). INVALID_ARGUMENT naming
    the field for a field without a value, a value without a field, a
    duplicate field, a pointer where an integer goes or vice versa, an
    integer that does not fit its 4 or 8 bytes, a refused null, or a field
    past the struct's end; sizes other than the served problem's
    (check_served_sizes). Needs no driver."""
    check_served_sizes(kernel, values)
    size = kernel.params_size_bytes
    if not kernel.params:
        raise _invalid(f"backend {kernel.variant} serves no parameter layout")
    struct = bytearray(size)
    seen = set()
    for f in kernel.params:
        where = f"parameter field '{f.name}' ({f.type}: {f.meaning})"
        if f.name in seen:
            raise _invalid(f"parameter field '{f.name}' appears twice in the layout")
        seen.add(f.name)
        if f.name not in values:
            raise _invalid(f"{where} has no value" + ("; pass None for null" if field_allows_null(f) else ""))
        if f.offset_bytes + f.size_bytes > size:
            raise _invalid(f"{where} runs past the struct's {size} bytes")
        value = values[f.name]
        if f.type == "ptr":
            if f.size_bytes != 8:
                raise _invalid(f"{where} is a pointer of {f.size_bytes} bytes")
            address = _address(value, where)
            if address == 0 and not field_allows_null(f):
                raise _invalid(f"{where} does not accept null")
            struct[f.offset_bytes:f.offset_bytes + 8] = address.to_bytes(8, "little")
            continue
        if value is None or hasattr(value, "data_ptr") or isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(f"{where} is an integer: pass an int, not {type(value).__name__}")
        if f.size_bytes not in (4, 8):
            raise _invalid(f"{where} is an integer of {f.size_bytes} bytes")
        try:
            raw = value.to_bytes(f.size_bytes, "little", signed=not f.type.startswith("u"))
        except OverflowError:
            raise _invalid(f"{where} cannot hold {value} in {f.size_bytes} bytes") from None
        struct[f.offset_bytes:f.offset_bytes + f.size_bytes] = raw
    for name, value in values.items():
        if name not in seen and value is not None:
            raise _invalid(f"backend {kernel.variant}'s parameter struct has no field '{name}'")
    return bytes(struct)


def launch_config(launch):
    """The CUlaunchConfig of a KernelLaunch (hStream left null) and the
    attribute array it points to (keep both alive): programmatic stream
    serialization where dependent_launch, the cluster dimension
    (cluster_x, 1, 1) where cluster_x > 1, as worker/planned_kernel.cc."""
    attrs = (_LaunchAttribute * 2)()
    count = 0
    if launch.dependent_launch:
        attrs[count].id = _LAUNCH_PROGRAMMATIC_STREAM_SERIALIZATION
        attrs[count].value.programmaticStreamSerializationAllowed = 1
        count += 1
    if launch.cluster_x > 1:
        attrs[count].id = _LAUNCH_CLUSTER_DIMENSION
        attrs[count].value.clusterDim = _ClusterDim(launch.cluster_x, 1, 1)
        count += 1
    grid = (list(launch.grid) + [1, 1, 1])[:3]
    block = (list(launch.block) + [1, 1, 1])[:3]
    config = _LaunchConfig(*grid, *block, launch.shared_bytes, None, ctypes.cast(attrs, POINTER(_LaunchAttribute)),
                           count)
    return config, attrs


class LoadedKernel:
    """A served kernel loaded into a CUDA context, with its workspace.

    Construction needs the driver: the cubin goes into the context current on
    this thread (with PyTorch, torch's primary context once torch.cuda.init()
    ran or a tensor was allocated; with none current, `device`'s primary
    context, retained and made current), each launch entry is resolved with
    the worker's shared-memory and cluster opt-ins, and workspace_bytes (at
    least 256) of scratch are allocated with cuMemAlloc, or `workspace` (a
    tensor or device address of at least workspace_bytes) is used instead.

    Workspace contract: where workspace_zero_once, the first
    workspace_zero_bytes are zeroed once, on the stream of the first run();
    the kernels leave them ready for the next launch, so every run() sharing
    this workspace must be ordered on that one stream. Otherwise they are
    zeroed on the run's stream before every phase.

    Not thread-safe. close() (or the with-block's end) synchronizes the
    context, then frees the workspace and unloads the module.
    """

    def __init__(self, kernel, *, workspace=None, device=0, library=LIBCUDA):
        self.kernel = kernel
        self.workspace = None  # its device address
        self._lib = self._ctx = self._module = self._retained = self._owned_workspace = None
        self._workspace_ref = workspace  # kept alive while in use
        name = f"backend {kernel.variant}"
        if not kernel.cubin:
            raise _invalid(f"{name}: the response carries no cubin")
        if not kernel.launches:
            raise _invalid(f"{name}: the response has no launches")
        if kernel.workspace_zero_bytes > kernel.workspace_bytes:
            raise _invalid(f"{name}: workspace_zero_bytes exceeds workspace_bytes")
        for launch in kernel.launches:
            grid_x = launch.grid[0] if launch.grid else 1
            if launch.cluster_x > 1 and grid_x % launch.cluster_x:
                raise _invalid(f"{name}: kernel {launch.entry} has grid.x {grid_x}, not a multiple of its cluster "
                               f"of {launch.cluster_x}")
        if workspace is not None:
            nbytes = workspace.numel() * workspace.element_size() if hasattr(workspace, "numel") else None
            if nbytes is not None and nbytes < kernel.workspace_bytes:
                raise _invalid(f"{name}: the workspace tensor has {nbytes} bytes, the kernel needs "
                               f"{kernel.workspace_bytes}")
            self.workspace = _address(workspace, "the workspace")
            if not self.workspace:
                raise _invalid(f"{name}: the workspace is null")
        self._lib = lib = load_driver(library)
        try:
            ctx = c_void_p()
            _check(lib, lib.cuCtxGetCurrent(byref(ctx)), "cuCtxGetCurrent")
            if not ctx.value:
                dev = c_int()
                _check(lib, lib.cuDeviceGet(byref(dev), device), f"cuDeviceGet({device})")
                _check(lib, lib.cuDevicePrimaryCtxRetain(byref(ctx), dev), "cuDevicePrimaryCtxRetain")
                self._retained = dev.value
                _check(lib, lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
            self._ctx = ctx
            module = c_void_p()
            _check(lib, lib.cuModuleLoadData(byref(module), kernel.cubin), f"cuModuleLoadData({kernel.variant})")
            self._module = module
            self._phases = {}
            for launch in kernel.launches:
                self._phases.setdefault(launch.phase, []).append(self._resolve(launch))
            if workspace is None:
                address, nbytes = c_uint64(), max(kernel.workspace_bytes, MIN_WORKSPACE_BYTES)
                _check(lib, lib.cuMemAlloc_v2(byref(address), nbytes), f"cuMemAlloc({nbytes})")
                self._owned_workspace = self.workspace = address.value
            self._zero_pending = kernel.workspace_zero_bytes > 0
        except BaseException:
            self.close()
            raise

    def _resolve(self, launch):
        """cuModuleGetFunction, the function attributes as the worker sets
        them (worker/planned_kernel.cc), and its launch config built once."""
        lib = self._lib
        function = c_void_p()
        _check(lib, lib.cuModuleGetFunction(byref(function), self._module, launch.entry.encode()),
               f"cuModuleGetFunction({launch.entry})")
        if launch.shared_bytes > 0:  # the opt-in for any dynamic size: the static part is the kernel's
            _check(lib, lib.cuFuncSetAttribute(function, _FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.shared_bytes),
                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
            _check(lib, lib.cuFuncSetAttribute(function, _FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT, _CARVEOUT_MAX_SHARED),
                   "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)")
        if launch.cluster_x > _PORTABLE_CLUSTER:
            _check(lib, lib.cuFuncSetAttribute(function, _FUNC_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                   "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")
        return (function, *launch_config(launch), f"cuLaunchKernelEx({launch.entry})")

    @property
    def phases(self):
        """The phases the kernel has launches for ("fwd", "bwd"), in order."""
        return list(self._phases)

    def pack(self, values, workspace=None):
        """pack_params(kernel, values) with the "workspace" field given this
        launcher's workspace, or `workspace` (a tensor or device address of
        at least workspace_bytes, prepared by prepare_workspace). A workspace
        in `values` is refused: the launcher zeroes the one it is given."""
        if "workspace" in values:
            raise _invalid("parameter field 'workspace' is the launcher's (it zeroes it): pass yours as "
                           "LoadedKernel(kernel, workspace=...) or pack(..., workspace=...)")
        address = self.workspace if workspace is None else self._own_workspace(workspace)
        return pack_params(self.kernel, {**values, "workspace": address})

    def _own_workspace(self, workspace):
        nbytes = workspace.numel() * workspace.element_size() if hasattr(workspace, "numel") else None
        if nbytes is not None and nbytes < self.kernel.workspace_bytes:
            raise _invalid(f"backend {self.kernel.variant}: the workspace tensor has {nbytes} bytes, the kernel "
                           f"needs {self.kernel.workspace_bytes}")
        address = _address(workspace, "the workspace")
        if not address:
            raise _invalid(f"backend {self.kernel.variant}: the workspace is null")
        return address

    def prepare_workspace(self, workspace, stream=None):
        """Readies a workspace of the caller's for run(..., workspace=...):
        zeroes its first workspace_zero_bytes on `stream` where the kernels
        keep them ready between launches (workspace_zero_once); otherwise
        run() zeroes them before every phase. Once per allocation."""
        address = self._own_workspace(workspace)
        zero = self.kernel.workspace_zero_bytes
        if zero and self.kernel.workspace_zero_once:
            handle = int(getattr(stream, "cuda_stream", stream) or 0) or None
            with self._current():
                _check(self._lib, self._lib.cuMemsetD8Async(address, 0, zero, handle), "cuMemsetD8Async(workspace)")

    @contextlib.contextmanager
    def _current(self):
        """This kernel's context current for the block: pushed (and popped
        after) if the thread has another one current."""
        lib, current = self._lib, c_void_p()
        _check(lib, lib.cuCtxGetCurrent(byref(current)), "cuCtxGetCurrent")
        if current.value == self._ctx.value:
            yield
            return
        _check(lib, lib.cuCtxPushCurrent_v2(self._ctx), "cuCtxPushCurrent")
        try:
            yield
        finally:
            lib.cuCtxPopCurrent_v2(byref(current))

    def run(self, phase, params, stream=None, workspace=None):
        """Queues `phase`'s launches in order on `stream` (a CUstream handle
        as int, an object with .cuda_stream such as a torch.cuda.Stream, or
        None: the legacy default stream, torch's default) and returns without
        waiting. params: a dict for pack(), or the bytes pack() returned (one
        struct may be launched many times). `workspace`: the caller's, as
        prepared by prepare_workspace and packed into params, in place of
        the launcher's own. NOT_FOUND for a phase the kernel has no launch
        for."""
        if self._module is None:
            raise ScantuneError("FAILED_PRECONDITION", f"backend {self.kernel.variant} is closed")
        if phase not in self._phases:
            raise ScantuneError("NOT_FOUND", f"backend {self.kernel.variant} has no '{phase}' launch "
                                f"(it has {', '.join(self._phases)})")
        packed = (bytes(params) if isinstance(params, (bytes, bytearray, memoryview))
                  else self.pack(params, workspace))
        if len(packed) != self.kernel.params_size_bytes:
            raise _invalid(f"parameter struct of {len(packed)} bytes; backend {self.kernel.variant} takes "
                           f"{self.kernel.params_size_bytes}")
        handle = int(getattr(stream, "cuda_stream", stream) or 0) or None
        lib, zero = self._lib, self.kernel.workspace_zero_bytes
        own = workspace is None
        address = self.workspace if own else self._own_workspace(workspace)
        with self._current():
            if zero and ((own and self._zero_pending) or not self.kernel.workspace_zero_once):
                _check(lib, lib.cuMemsetD8Async(address, 0, zero, handle), "cuMemsetD8Async(workspace)")
                if own:
                    self._zero_pending = False
            struct = ctypes.create_string_buffer(packed, len(packed))  # the driver copies it at launch
            args = (c_void_p * 1)(ctypes.addressof(struct))  # the kernels' one argument: the struct, by value
            for function, config, _, call in self._phases[phase]:
                config.hStream = handle
                _check(lib, lib.cuLaunchKernelEx(byref(config), function, args, None), call)

    def close(self):
        """Waits for the context's work (cuCtxSynchronize), frees the
        workspace allocated here and unloads the module. Idempotent."""
        if self._lib is None:
            return
        lib = self._lib
        try:
            if self._ctx is not None:
                with self._current():
                    _check(lib, lib.cuCtxSynchronize(), "cuCtxSynchronize")
                    if self._owned_workspace is not None:
                        _check(lib, lib.cuMemFree_v2(self._owned_workspace), "cuMemFree(workspace)")
                    if self._module is not None:
                        _check(lib, lib.cuModuleUnload(self._module), "cuModuleUnload")
        finally:
            self._lib = self._module = self._owned_workspace = self._workspace_ref = None
            if self._retained is not None:
                lib.cuDevicePrimaryCtxRelease_v2(self._retained)
                self._retained = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
