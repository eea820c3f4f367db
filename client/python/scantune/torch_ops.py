"""Served scan kernels as PyTorch operators with autograd: a training job
asks the service for a problem's kernel once, then calls it like any op.

    client = scantune.Client()
    scan = ServedScan(client, "samu", (4, 2048, 2048), "bf16")    # GetKernel: the problem's selection
    y, h_final = scan(x, lam, beta, gamma, controller, h0=h0)     # x bf16 (B, L, W); parameters fp32
    (y * dy).sum().backward()                                     # the served backward: every gradient

    mamba = ServedScan(client, "selective_scan", (4, 2048, 1024), "bf16", state=16, delta_softplus=True,
                       delta_bias=True, z_gate=True)
    y, h_final = mamba(u, delta, A, Bm, Cm, Dv, z=z, delta_bias=delta_bias)   # mamba's selective_scan_fn order

Inputs in each operator's order (activations contiguous CUDA tensors of the
problem's dtype; parameters and h0 fp32):
    linear_scan:    a, x (B, L, W)                          -> h, h_final (B, W)
    rglru:          x, ga, gx (B, L, W), lambda (W)         -> h, h_final (B, W)
    samu:           x (B, L, W), lambda, beta, gamma (W), controller (4) -> y, h_final (B, W)
    selective_scan: u, delta (B, L, D), A (D, N), Bm, Cm (B, L, N), Dv (D); z (B, L, D) and
                    delta_bias (D) by keyword where the problem has them -> y, h_final (B, D, N)
h_final (fp32) carries no gradient: the kernels take none for it. Every
call runs on torch's current stream with a workspace of its own (zeroed as
the served contract says), so calls may interleave their forwards and
backwards as autograd orders them. Needs torch (imported here, not by the
scantune package)."""

import torch

from scantune.client import ScantuneError
from scantune.launch import LoadedKernel

# Every tensor by field name: its dims (over B, L, W -- selective_scan's D -- and N, its state) and whether it is
# of the problem's dtype ("act") or fp32.
_BLW, _W, _F32, _ACT = ("B", "L", "W"), ("W",), "f32", "act"
_TENSORS = {
    "a": (_BLW, _ACT), "x": (_BLW, _ACT), "ga": (_BLW, _ACT), "gx": (_BLW, _ACT),
    "lambda": (_W, _F32), "beta": (_W, _F32), "gamma": (_W, _F32), "controller": ((4,), _F32),
    "h": (_BLW, _ACT), "y": (_BLW, _ACT), "ctrl": (("B", "L", 2), _F32),
    "u": (_BLW, _ACT), "delta": (_BLW, _ACT), "z": (_BLW, _ACT), "A": (("W", "N"), _F32),
    "Bm": (("B", "L", "N"), _ACT), "Cm": (("B", "L", "N"), _ACT), "Dv": (_W, _F32), "delta_bias": (_W, _F32),
}
# Per operator: its differentiable inputs in call order, those passed by keyword where the problem has them
# (with the option that says so), the forward output, the state's dims (h0, h_final), the tensors the forward
# writes for the backward besides its output, the upstream gradient's field and the struct's size fields.
_OPS = {
    "linear_scan": {"inputs": ("a", "x"), "optional": {}, "out": "h", "state": ("B", "W"), "saved": (),
                    "grad_out": "dh", "sizes": ("batch", "length", "width")},
    "rglru": {"inputs": ("x", "ga", "gx", "lambda"), "optional": {}, "out": "h", "state": ("B", "W"), "saved": (),
              "grad_out": "dh", "sizes": ("batch", "length", "width")},
    "samu": {"inputs": ("x", "lambda", "beta", "gamma", "controller"), "optional": {}, "out": "y",
             "state": ("B", "W"), "saved": ("h", "ctrl"), "grad_out": "dy", "sizes": ("batch", "length", "width")},
    "selective_scan": {"inputs": ("u", "delta", "A", "Bm", "Cm", "Dv"),
                       "optional": {"z": "z_gate", "delta_bias": "delta_bias"}, "out": "y",
                       "state": ("B", "W", "N"), "saved": (), "grad_out": "dy",
                       "sizes": ("batch", "length", "dim", "state")},
}
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_SSM_OPTIONS = ("state", "delta_bias", "delta_softplus", "z_gate")


class ServedScan:
    """One problem's served kernel (op, (B, L, W), dtype; fwd_bwd) as a
    callable with autograd. `kernel`: a KernelResponse already fetched, or
    None to ask `client` (get_kernel with variant, deterministic, on_miss
    and h0 as Client.get_kernel takes them). selective_scan's problem
    options (state, delta_bias, delta_softplus, z_gate) are keywords here
    too: they decide which inputs a call takes, and they must be the
    kernel's. close() unloads it."""

    def __init__(self, client, op, shape, dtype, *, kernel=None, h0=False, **get_kernel_args):
        if op not in _OPS:
            raise ScantuneError("INVALID_ARGUMENT", f"operator '{op}' has no torch op here ({', '.join(_OPS)})")
        options = {k: get_kernel_args[k] for k in _SSM_OPTIONS if k in get_kernel_args}
        if options and op != "selective_scan":
            raise ScantuneError("INVALID_ARGUMENT", f"{', '.join(options)}: selective_scan's options, not {op}'s")
        self.op, self.shape, self.dtype = op, tuple(int(n) for n in shape), dtype
        self.options = {"state": int(options.get("state", 0)) or 16,
                        **{k: bool(options.get(k, False)) for k in _SSM_OPTIONS[1:]}}
        if kernel is None:
            kernel = client.get_kernel(op, self.shape, dtype, "fwd_bwd", h0=h0, **get_kernel_args)
        elif op == "selective_scan" and kernel.HasField("selection") and kernel.selection.HasField("problem"):
            served = kernel.selection.problem
            theirs = {"state": served.state_dim or 16, "delta_bias": served.delta_bias,
                      "delta_softplus": served.delta_softplus, "z_gate": served.z_gate}
            if theirs != self.options:
                raise ScantuneError("INVALID_ARGUMENT", f"the kernel was served for {theirs}, not {self.options}")
        self.loaded = LoadedKernel(kernel)
        self.spec = _OPS[op]
        B, L, W = self.shape
        self.dims = {"B": B, "L": L, "W": W, "N": self.options["state"]}
        # The inputs this problem has, in call order (the optional ones after the others).
        self.names = self.spec["inputs"] + tuple(n for n, option in self.spec["optional"].items()
                                                 if self.options[option])

    def tensor_shape(self, name):
        dims, _ = _TENSORS[name]
        return tuple(self.dims.get(d, d) for d in dims)

    def tensor_dtype(self, name):
        return _DTYPES[self.dtype] if _TENSORS[name][1] == _ACT else torch.float32

    def __call__(self, *inputs, h0=None, **optional):
        spec = self.spec
        required = spec["inputs"]
        if len(inputs) != len(required):
            raise ScantuneError("INVALID_ARGUMENT", f"{self.op} takes {len(required)} inputs ({', '.join(required)}), "
                                f"got {len(inputs)}")
        for name in optional:
            if name not in spec["optional"]:
                raise ScantuneError("INVALID_ARGUMENT", f"{self.op} has no input '{name}'")
        for name, option in spec["optional"].items():
            given = optional.get(name) is not None
            if given != self.options[option]:
                raise ScantuneError("INVALID_ARGUMENT", f"{self.op} {name}: " + (
                    f"the problem has {option}, so the call takes {name}" if self.options[option] else
                    f"the problem has no {option}; ask for a kernel with {option}=True"))
        tensors = list(inputs) + [optional[n] for n in self.names[len(required):]]
        for name, t in zip(self.names, tensors):
            self._check(name, t, self.tensor_shape(name), self.tensor_dtype(name))
        if h0 is not None:
            self._check("h0", h0, tuple(self.dims[d] for d in spec["state"]), torch.float32)
        return _ScanFn.apply(self, h0, *tensors)

    def _check(self, name, t, shape, dtype):
        if not (isinstance(t, torch.Tensor) and t.is_cuda and t.is_contiguous() and tuple(t.shape) == shape
                and t.dtype == dtype):
            got = (f"{tuple(t.shape)} {t.dtype}{'' if t.is_cuda else ' on the host'}"
                   f"{'' if t.is_contiguous() else ', not contiguous'}") if isinstance(t, torch.Tensor) else type(t)
            raise ScantuneError("INVALID_ARGUMENT", f"{self.op} {name}: a contiguous CUDA tensor {shape} {dtype} "
                                f"(the served problem's), got {got}")

    def close(self):
        self.loaded.close()


class _ScanFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, served, h0, *inputs):
        spec = served.spec
        first = inputs[0]
        out = torch.empty(served.tensor_shape(spec["out"]), dtype=first.dtype, device=first.device)
        h_final = torch.empty(tuple(served.dims[d] for d in spec["state"]), dtype=torch.float32, device=first.device)
        saved = {name: torch.empty(served.tensor_shape(name), dtype=served.tensor_dtype(name), device=first.device)
                 for name in spec["saved"]}
        loaded = served.loaded
        workspace = torch.empty(max(loaded.kernel.workspace_bytes, 256), dtype=torch.uint8, device=first.device)
        stream = torch.cuda.current_stream()
        loaded.prepare_workspace(workspace, stream)
        values = _values(served, inputs, h0, out, saved, h_final)
        # The gradients' fields are the backward's: the forward's kernels never touch them, and any non-null
        # address packs (the struct is one for both phases); those of absent optional inputs stay null.
        for name in spec["inputs"] + tuple(spec["optional"]):
            values["d" + name] = out if name in served.names else None
        values[spec["grad_out"]] = out
        values["dh0"] = None
        loaded.run("fwd", values, stream=stream, workspace=workspace)
        ctx.served, ctx.has_h0, ctx.workspace = served, h0 is not None, workspace
        ctx.save_for_backward(*inputs, out, *saved.values(), *([h0] if h0 is not None else []))
        ctx.mark_non_differentiable(h_final)
        return out, h_final

    @staticmethod
    def backward(ctx, grad_out, _grad_h_final):
        served = ctx.served
        spec = served.spec
        tensors = list(ctx.saved_tensors)
        n_in = len(served.names)
        inputs, out = tensors[:n_in], tensors[n_in]
        saved = dict(zip(spec["saved"], tensors[n_in + 1:n_in + 1 + len(spec["saved"])]))
        h0 = tensors[-1] if ctx.has_h0 else None
        grads = [torch.empty_like(t) for t in inputs]
        dh0 = torch.empty_like(h0) if h0 is not None else None
        values = _values(served, inputs, h0, out, saved, None)
        values.update({"d" + n: None for n in spec["optional"]})
        values.update({"d" + n: g for n, g in zip(served.names, grads)})
        values[spec["grad_out"]] = grad_out.contiguous().to(out.dtype)
        values["dh0"] = dh0
        stream = torch.cuda.current_stream()
        served.loaded.run("bwd", values, stream=stream, workspace=ctx.workspace)
        return (None, dh0, *grads)


def _values(served, inputs, h0, out, saved, h_final):
    spec = served.spec
    values = dict(zip(served.names, inputs))
    values.update({n: None for n in spec["optional"] if n not in served.names})
    values.update(saved)
    B, L, W = served.shape
    sizes = dict(zip(spec["sizes"], (B, L, W, served.dims["N"])))
    values.update({spec["out"]: out, "h0": h0, "h_final": h_final, **sizes})
    return values
