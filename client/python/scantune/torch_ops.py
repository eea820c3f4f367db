"""Served scan kernels as PyTorch operators with autograd: a training job
asks the service for a problem's kernel once, then calls it like any op.

    client = scantune.Client()
    scan = ServedScan(client, "samu", (4, 2048, 2048), "bf16")    # GetKernel: the problem's selection
    y, h_final = scan(x, lam, beta, gamma, controller, h0=h0)     # x bf16 (B, L, W); parameters fp32
    (y * dy).sum().backward()                                     # the served backward: every gradient

Inputs in each operator's order (activations contiguous (B, L, W) CUDA
tensors of the problem's dtype; parameters and h0 fp32):
    linear_scan: a, x                     -> h, h_final
    rglru:       x, ga, gx, lambda (W)    -> h, h_final
    samu:        x, lambda, beta, gamma (W), controller (4) -> y, h_final
h_final (B, W, fp32) carries no gradient: the kernels take none for it.
Every call runs on torch's current stream with a workspace of its own
(zeroed as the served contract says), so calls may interleave their
forwards and backwards as autograd orders them. Needs torch (imported
here, not by the scantune package)."""

import torch

from scantune.client import ScantuneError
from scantune.launch import LoadedKernel

# Per operator: its differentiable inputs in call order (activations first), the forward output, the tensors
# the forward writes for the backward besides it (name: trailing dims after (B, L), None for W; dtype or None for
# the problem's), and the upstream gradient's field.
_OPS = {
    "linear_scan": {"activations": ("a", "x"), "parameters": (), "out": "h", "saved": {}, "grad_out": "dh"},
    "rglru": {"activations": ("x", "ga", "gx"), "parameters": ("lambda",), "out": "h", "saved": {}, "grad_out": "dh"},
    "samu": {"activations": ("x",), "parameters": ("lambda", "beta", "gamma", "controller"), "out": "y",
             "saved": {"h": (None, None), "ctrl": (2, torch.float32)}, "grad_out": "dy"},
}
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class ServedScan:
    """One problem's served kernel (op, (B, L, W), dtype; fwd_bwd) as a
    callable with autograd. `kernel`: a KernelResponse already fetched, or
    None to ask `client` (get_kernel with variant, deterministic, on_miss
    and h0 as Client.get_kernel takes them). close() unloads it."""

    def __init__(self, client, op, shape, dtype, *, kernel=None, h0=False, **get_kernel_args):
        if op not in _OPS:
            raise ScantuneError("INVALID_ARGUMENT", f"operator '{op}' has no torch op here (linear_scan, rglru, samu)")
        self.op, self.shape, self.dtype = op, tuple(int(n) for n in shape), dtype
        if kernel is None:
            kernel = client.get_kernel(op, self.shape, dtype, "fwd_bwd", h0=h0, **get_kernel_args)
        self.loaded = LoadedKernel(kernel)
        self.spec = _OPS[op]

    def __call__(self, *inputs, h0=None):
        spec = self.spec
        names = spec["activations"] + spec["parameters"]
        if len(inputs) != len(names):
            raise ScantuneError("INVALID_ARGUMENT", f"{self.op} takes {len(names)} inputs ({', '.join(names)}), "
                                f"got {len(inputs)}")
        B, L, W = self.shape
        for name, t in zip(names, inputs):
            want = ((B, L, W), _DTYPES[self.dtype]) if name in spec["activations"] else \
                (((4,) if name == "controller" else (W,)), torch.float32)
            self._check(name, t, *want)
        if h0 is not None:
            self._check("h0", h0, (B, W), torch.float32)
        return _ScanFn.apply(self, h0, *inputs)

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
        spec, (B, L, W) = served.spec, served.shape
        x = inputs[0]
        out = torch.empty_like(x)
        h_final = torch.empty(B, W, dtype=torch.float32, device=x.device)
        saved = {name: torch.empty(B, L, W if n is None else n, dtype=x.dtype if d is None else d, device=x.device)
                 for name, (n, d) in spec["saved"].items()}
        loaded = served.loaded
        workspace = torch.empty(max(loaded.kernel.workspace_bytes, 256), dtype=torch.uint8, device=x.device)
        stream = torch.cuda.current_stream()
        loaded.prepare_workspace(workspace, stream)
        values = _values(served, inputs, h0, out, saved, h_final)
        # The gradients' fields are the backward's: the forward's kernels never touch them, and any non-null
        # address packs (the struct is one for both phases).
        for name in ("d" + n for n in spec["activations"] + spec["parameters"]):
            values[name] = out
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
        spec, (B, L, W) = served.spec, served.shape
        tensors = list(ctx.saved_tensors)
        n_in = len(spec["activations"]) + len(spec["parameters"])
        inputs, out = tensors[:n_in], tensors[n_in]
        saved = dict(zip(spec["saved"], tensors[n_in + 1:n_in + 1 + len(spec["saved"])]))
        h0 = tensors[-1] if ctx.has_h0 else None
        grads = [torch.empty_like(t) for t in inputs]
        dh0 = torch.empty_like(h0) if h0 is not None else None
        values = _values(served, inputs, h0, out, saved, None)
        values.update({"d" + n: g for n, g in zip(spec["activations"] + spec["parameters"], grads)})
        values[spec["grad_out"]] = grad_out.contiguous().to(out.dtype)
        values["dh0"] = dh0
        stream = torch.cuda.current_stream()
        served.loaded.run("bwd", values, stream=stream, workspace=ctx.workspace)
        return (None, dh0, *grads)


def _values(served, inputs, h0, out, saved, h_final):
    spec, (B, L, W) = served.spec, served.shape
    values = dict(zip(spec["activations"] + spec["parameters"], inputs))
    values.update(saved)
    values.update({spec["out"]: out, "h0": h0, "h_final": h_final, "batch": B, "length": L, "width": W})
    return values
