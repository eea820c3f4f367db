"""Seed 000's table on this GPU: the complete recurrent block (seed000.py says
which) with the RG-LRU and the SAMU mixer, each mixer's scan the kernel the
service selected for its problem (ServedScan over GetKernel), timed as seed
000 times it: BF16 autocast with the FP32 carry, forward / backward /
forward+backward with the input gradient, CUDA events, counterbalanced AB/BA
rounds, allocator memory before and at the peak. Writes JSON in seed 000's
schema and prints the table with SAMU / RG-LRU beside the seed's ratio.

    python3 bench/block/block_bench.py --address unix:///tmp/s.sock --out block.json \\
        [--cases state2048_short,...] [--on-miss not_found|nearest|tune] [--seed ../shared/seeds/000_*.txt]

--check runs the block at a small shape with named kernels (fp32 and bf16)
against the same block in float64 with a reference scan (DESIGN.md's
recurrences, backward by autograd) and prints max |out - ref| / max |ref| of
the output and of every gradient; exit status 1 if one is above the bound.
Needs torch and the scantune package (PYTHONPATH=build/client/python)."""

import argparse
import copy
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scantune  # noqa: E402
import seed000  # noqa: E402
from scantune.torch_ops import ServedScan  # noqa: E402

nn, F = torch.nn, torch.nn.functional
C = 8.0  # the gate constant c of rglru and samu
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SAMU_CONTROLLER = "fp32_mean_sigmoid_coords_in_backend"  # m_t, r_t, i_t made by the samu kernels themselves


def decay_parameter(width, gen):
    """p with exp(-c softplus(p)) uniform in (0.9, 0.999): Griffin's initial decays."""
    a = 0.9 + 0.099 * torch.rand(width, generator=gen, dtype=torch.float64)
    return torch.log(torch.expm1(-torch.log(a) / C)).float()


class RgLruMixer(nn.Module):
    """ga = blockdiag(Wa) x + ba, gx = blockdiag(Wx) x + bx (16 heads), then scan(x, ga, gx, Lambda)."""

    def __init__(self, rnn_width, scan, gen):
        super().__init__()
        heads, d = seed000.HEADS, rnn_width // seed000.HEADS
        self.wa = nn.Parameter(torch.randn(heads, d, d, generator=gen) / d ** 0.5)
        self.wx = nn.Parameter(torch.randn(heads, d, d, generator=gen) / d ** 0.5)
        self.ba = nn.Parameter(torch.zeros(rnn_width))
        self.bx = nn.Parameter(torch.zeros(rnn_width))
        self.lam = nn.Parameter(decay_parameter(rnn_width, gen))
        self.scan = scan

    def forward(self, x):
        B, L, R = x.shape
        xh = x.view(B, L, seed000.HEADS, R // seed000.HEADS)
        ga = (torch.einsum("blhi,hij->blhj", xh, self.wa).reshape(B, L, R) + self.ba).to(x.dtype)
        gx = (torch.einsum("blhi,hij->blhj", xh, self.wx).reshape(B, L, R) + self.bx).to(x.dtype)
        return self.scan(x, ga.contiguous(), gx.contiguous(), self.lam)


class SamuMixer(nn.Module):
    """scan(x, lambda, beta, gamma, controller): the controller (w_r, b_r, w_i, b_i) is inside the scan."""

    def __init__(self, rnn_width, scan, gen):
        super().__init__()
        self.lam = nn.Parameter(decay_parameter(rnn_width, gen))
        self.beta = nn.Parameter(1.0 + 0.1 * torch.randn(rnn_width, generator=gen))
        self.gamma = nn.Parameter(1.0 + 0.1 * torch.randn(rnn_width, generator=gen))
        self.controller = nn.Parameter(torch.tensor([1.0, 0.5, -1.0, 1.0]))
        self.scan = scan

    def forward(self, x):
        return self.scan(x, self.lam, self.beta, self.gamma, self.controller)


class RecurrentBlock(nn.Module):
    """Seed 000's block (seed000.py's docstring has its equations)."""

    def __init__(self, width, rnn_width, mixer):
        super().__init__()
        hidden = seed000.MLP_EXPANSION * width
        self.norm1, self.norm2 = nn.RMSNorm(width), nn.RMSNorm(width)
        self.x_proj, self.y_proj = nn.Linear(width, rnn_width), nn.Linear(width, rnn_width)
        self.conv = nn.Conv1d(rnn_width, rnn_width, seed000.CONV_WIDTH, groups=rnn_width,
                              padding=seed000.CONV_WIDTH - 1)
        self.mixer = mixer
        self.out_proj = nn.Linear(rnn_width, width)
        self.mlp_gate, self.mlp_up = nn.Linear(width, hidden), nn.Linear(width, hidden)
        self.mlp_down = nn.Linear(hidden, width)

    def forward(self, x):
        L = x.shape[1]
        u = self.norm1(x)
        xb = self.conv(self.x_proj(u).transpose(1, 2))[..., :L].transpose(1, 2).contiguous()
        yb = F.gelu(self.y_proj(u))
        x = x + self.out_proj(self.mixer(xb) * yb)
        v = self.norm2(x)
        return x + self.mlp_down(F.gelu(self.mlp_gate(v)) * self.mlp_up(v))


def served_scan(op, served):
    """The mixer's scan through a ServedScan: its output (h or y), the final state dropped."""
    return lambda *inputs: served(*inputs)[0]


def reference_scan(op):
    """DESIGN.md's recurrence in the inputs' dtype (float64 for the check), differentiable by autograd."""

    def scan(x, *params):
        B, L, W = x.shape
        if op == "rglru":
            ga, gx, lam = params
            la = -C * F.softplus(lam) * torch.sigmoid(ga)
            b = torch.sqrt(-torch.expm1(2 * la)) * torch.sigmoid(gx) * x
        else:
            lam, beta, gamma, (w_r, b_r, w_i, b_i) = params
            m = x.mean(dim=2, keepdim=True)
            r, i = torch.sigmoid(w_r * m + b_r), torch.sigmoid(w_i * m + b_i)
            la = -C * F.softplus(lam) * r
            b = torch.sqrt(-torch.expm1(2 * la)) * i * beta * x
        a, h, hs = torch.exp(la), torch.zeros(B, W, dtype=x.dtype, device=x.device), []
        for t in range(L):
            h = a[:, t] * h + b[:, t]
            hs.append(h)
        out = torch.stack(hs, dim=1)
        return gamma * out if op == "samu" else out

    return scan


def make_block(arch, width, rnn_width, scan, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the linear and conv layers' own initialisation
    mixer = (RgLruMixer if arch == "rglru" else SamuMixer)(rnn_width, scan, gen)
    return RecurrentBlock(width, rnn_width, mixer)


def copy_shared(source, target):
    """Copies every parameter outside the mixer from source to target; returns how many values it copied."""
    theirs = dict(source.named_parameters())
    copied = 0
    with torch.no_grad():
        for name, p in target.named_parameters():
            if not name.startswith("mixer."):
                p.copy_(theirs[name])
                copied += p.numel()
    return copied


def served_for(client, arch, shape, dtype, **get_kernel_args):
    kernel = client.get_kernel(arch, shape, dtype, "fwd_bwd", **get_kernel_args)
    return ServedScan(None, arch, shape, dtype, kernel=kernel), kernel.variant


# ---- the timing ------------------------------------------------------------------------------------------

class Timed:
    """One architecture's block, input and upstream gradient, and its three modes as timed calls."""

    def __init__(self, arch, block, x, dy, backend):
        self.arch, self.block, self.x, self.dy, self.backend = arch, block, x, dy, backend
        self.samples = {field: [] for field, _ in seed000.MODES}

    def _clear(self):
        self.x.grad = None
        for p in self.block.parameters():
            p.grad = None

    def _forward(self):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.block(self.x)

    def run(self, field):
        """One untimed call of the mode (warm-up)."""
        self._clear()
        out = self._forward()
        if field != "forward":
            out.backward(self.dy)

    def sample(self, field):
        """One timed call of the mode in ms (events around the timed part only; the backward's forward and the
        gradients' reset are outside them). A short GPU sleep first lets the host queue the launches ahead."""
        self._clear()
        out = self._forward() if field == "backward" else None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(2_000_000)
        start.record()
        if field != "backward":
            out = self._forward()
        if field != "forward":
            out.backward(self.dy)
        end.record()
        end.synchronize()
        self.samples[field].append(start.elapsed_time(end))

    def memory(self):
        """Allocator bytes before a forward+backward (parameters, input, no gradients) and at its peak."""
        self._clear()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        m = {"baseline_allocated": torch.cuda.memory_allocated(), "baseline_reserved": torch.cuda.memory_reserved()}
        torch.cuda.reset_peak_memory_stats()
        self.run("forward_backward")
        torch.cuda.synchronize()
        m.update(peak_allocated=torch.cuda.max_memory_allocated(), peak_reserved=torch.cuda.max_memory_reserved())
        return m


def bench_case(client, name, args):
    _, batch, length, width, rnn_width, _ = seed000.case(name)
    shape = (batch, length, rnn_width)
    get_args = dict(on_miss=args.on_miss, deterministic=args.deterministic)
    timed, served, blocks = {}, [], {}
    gen = torch.Generator(device="cuda").manual_seed(args.input_seed)
    x = torch.randn(batch, length, width, generator=gen, device="cuda", requires_grad=True)
    dy = torch.randn(batch, length, width, generator=gen, device="cuda")
    for arch in seed000.ARCHITECTURES:
        scan, backend = served_for(client, arch, shape, "bf16", **get_args)
        served.append(scan)
        blocks[arch] = make_block(arch, width, rnn_width, served_scan(arch, scan), args.input_seed).cuda()
        timed[arch] = Timed(arch, blocks[arch], x, dy, backend)
    shared_copied = copy_shared(blocks["rglru"], blocks["samu"])
    for arch in seed000.ARCHITECTURES:
        counted = sum(p.numel() for p in blocks[arch].parameters())
        expected = seed000.block_parameters(arch, width, rnn_width)
        if counted != expected:
            raise RuntimeError(f"{name} {arch}: the block has {counted} parameters, seed 000's architecture "
                               f"{expected}")
    for t in timed.values():
        for _ in range(args.warmup):
            for field, _ in seed000.MODES:
                t.run(field)
    for round_index in range(args.samples):
        for arch in seed000.round_order(round_index):
            for field, _ in seed000.MODES:
                timed[arch].sample(field)
        print(f"  {name}: round {round_index + 1}/{args.samples}", file=sys.stderr, flush=True)
    rows = []
    for arch in seed000.round_order(0):
        t = timed[arch]
        rows.append(seed000.make_row(arch, t.backend, SAMU_CONTROLLER if arch == "samu" else None, t.samples,
                                     t.memory(), sum(p.numel() for p in blocks[arch].parameters())))
    for s in served:
        s.close()
    return seed000.make_case(name, shared_copied, rows)


# ---- the check -------------------------------------------------------------------------------------------

def rel_err(got, want):
    got = got.double()
    if not torch.isfinite(got).all():
        return float("inf")
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-300)).item()


def check_block(client, arch, dtype, shape, variant, seed=7):
    """The block with the named served kernel (fp32: no autocast; bf16: BF16 autocast) against a float64
    copy with the reference scan: {"out" | "dx" | "d<parameter>": max |got - ref| / max |ref|}."""
    B, L, R = shape
    width = R
    scan, _ = served_for(client, arch, shape, dtype, variant=variant)
    try:
        block = make_block(arch, width, R, served_scan(arch, scan), seed).cuda()
        ref = copy.deepcopy(block).double()
        ref.mixer.scan = reference_scan(arch)
        gen = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(B, L, width, generator=gen, device="cuda")
        dy = torch.randn(B, L, width, generator=gen, device="cuda")
        x.requires_grad_(True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            out = block(x)
        out.backward(dy)
        x64 = x.detach().double().requires_grad_(True)
        out64 = ref(x64)
        out64.backward(dy.double())
        errors = {"out": rel_err(out.detach(), out64.detach()), "dx": rel_err(x.grad, x64.grad)}
        refs = dict(ref.named_parameters())
        for name, p in block.named_parameters():
            errors["d" + name] = rel_err(p.grad, refs[name].grad)
        return errors
    finally:
        scan.close()


# Named kernels for the check (each legal at the check's shape; bf16 samu _y1 is fwd_bwd-only, as here).
CHECK_SHAPE = (2, 256, 96)
# (arch, dtype, variant, bound, checked): fp32 bounds every gradient; bf16 (autocast: every GEMM in bf16, so
# a parameter gradient summed over B x L tokens may cancel to far below its terms) the output and dx.
CHECK_CASES = (("rglru", "fp32", "lookback_v2_t256_s8_i8_o2", 1e-4, None),
               ("samu", "fp32", "lookback_v2_t256_s4_i16_o5", 1e-4, None),
               ("rglru", "bf16", "lookback_v2_t256_s8_i8_o2", 5e-2, ("out", "dx")),
               ("samu", "bf16", "chunked_v8_t256_c32_l64_y1", 5e-2, ("out", "dx")))


def run_check(client):
    """Every CHECK_CASES entry; prints each one's worst error; 0 if all are within their bounds, else 1."""
    torch.backends.cudnn.allow_tf32 = False  # the fp32 block's conv in fp32, as its reference
    torch.backends.cuda.matmul.allow_tf32 = False
    failed = False
    for arch, dtype, variant, bound, checked in CHECK_CASES:
        errors = check_block(client, arch, dtype, CHECK_SHAPE, variant)
        bounded = {k: v for k, v in errors.items() if checked is None or k in checked}
        worst, worst_all = max(bounded, key=bounded.get), max(errors, key=errors.get)
        bad = {k: v for k, v in bounded.items() if not v <= bound}
        failed |= bool(bad)
        print(f"{arch} {dtype} {variant}: worst of {len(bounded)} bounded {worst} {errors[worst]:.2e} "
              f"(bound {bound:.0e}); worst of all {worst_all} {errors[worst_all]:.2e}"
              + (f"  ABOVE: {bad}" if bad else ""), flush=True)
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=os.environ.get("SCANTUNE_ADDRESS"))
    parser.add_argument("--cases", default=",".join(c[0] for c in seed000.CASES))
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--on-miss", default="not_found", choices=("not_found", "nearest", "tune"))
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--input-seed", type=int, default=0)
    parser.add_argument("--out", help="JSON in seed 000's schema")
    parser.add_argument("--seed", help="seed 000's file, for its SAMU / RG-LRU ratios in the table")
    parser.add_argument("--check", action="store_true", help="the float64 check at a small shape, then exit")
    args = parser.parse_args(argv)
    if args.samples < 1 or args.warmup < 0:
        parser.error("--samples must be at least 1 and --warmup at least 0")
    cases = [c for c in args.cases.split(",") if c]
    for name in cases:
        seed000.case(name)  # an unknown case fails before any work
    if not torch.cuda.is_available():
        print("block_bench: torch sees no GPU", file=sys.stderr)
        return 2
    with scantune.Client(args.address, timeout_s=3600) as client:
        if args.check:
            return run_check(client)
        results = []
        for name in cases:
            print(f"== {name}", file=sys.stderr, flush=True)
            results.append(bench_case(client, name, args))
    environment = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name()}
    report = seed000.make_report(environment, results)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
    print(seed000.format_table(report, seed000.load_seed(args.seed) if args.seed else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
