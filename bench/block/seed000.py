"""Seed 000's complete recurrent block, without torch: its cases, the block's
parameter count, the timing statistics, the AB/BA order of the rounds and the
report in seed 000's schema (block_bench.py measures; this module counts,
orders and writes, so CI tests it without a GPU).

The block (Griffin's recurrent block, seed 000's "norm, x/y projections,
depthwise conv, mixer, join/output, norm and gated MLP") at width W and
recurrent width R:
    u = rmsnorm(x); xb = conv4(x_proj(u)); yb = gelu(y_proj(u))
    x = x + out_proj(mixer(xb) * yb)
    x = x + mlp_down(gelu(mlp_gate(v)) * mlp_up(v)),  v = rmsnorm(x)
with biases on every linear map, a causal depthwise conv of width 4 (with
bias) and an MLP of 3W. The mixer is the RG-LRU (16-head block-diagonal gate
projections with biases, then the rglru scan) or SAMU (the samu scan, its
4-parameter controller inside)."""

import json
import statistics

HEADS = 16          # the RG-LRU mixer's block-diagonal gate projections
MLP_EXPANSION = 3   # the gated MLP's hidden width, in W
CONV_WIDTH = 4
ARCHITECTURES = ("rglru", "samu")
MODES = (("forward", "fwd"), ("backward", "bwd"), ("forward_backward", "fwd_bwd"))
# Seed 000's cases: (name, batch, length, width, rnn_width, depth). depth is the model's; one block is timed.
CASES = (
    ("state2048_short", 4, 2048, 2048, 2048, 1),
    ("state2560_medium", 1, 8192, 2560, 2560, 1),
    ("state1024_long", 1, 32768, 1024, 1024, 1),
    ("400m_block_long", 1, 32768, 1536, 2048, 12),
)
PROTOCOL = {
    "scope": "complete recurrent block including input gradient",
    "components": "norm, x/y projections, depthwise conv, mixer, join/output, norm and gated MLP",
    "dtype": "BF16 autocast, FP32 recurrent carry",
    "order": "AB/BA",
    "compile_excluded": True,
}


def case(name):
    for c in CASES:
        if c[0] == name:
            return c
    raise ValueError(f"no seed-000 case '{name}' (cases: {', '.join(c[0] for c in CASES)})")


def shared_parameters(width, rnn_width):
    """The block's parameters outside the mixer (the ones both architectures share)."""
    W, R, M = width, rnn_width, MLP_EXPANSION * width
    projections = 2 * (W * R + R) + (R * W + W)     # x_proj, y_proj, out_proj
    mlp = 2 * (W * M + M) + (M * W + W)             # mlp_gate, mlp_up, mlp_down
    conv = CONV_WIDTH * R + R
    norms = 2 * W
    return projections + mlp + conv + norms


def mixer_parameters(arch, rnn_width):
    R = rnn_width
    if arch == "rglru":
        return 2 * R * R // HEADS + 3 * R           # Wa, Wx (block-diagonal), ba, bx, Lambda
    if arch == "samu":
        return 3 * R + 4                            # lambda, beta, gamma, the controller
    raise ValueError(f"unknown architecture '{arch}'")


def block_parameters(arch, width, rnn_width):
    return shared_parameters(width, rnn_width) + mixer_parameters(arch, rnn_width)


def sample_stats(samples_ms):
    """Seed 000's statistics of one mode's samples: population std, MAD about the median."""
    median = statistics.median(samples_ms)
    return {
        "samples_ms": list(samples_ms),
        "median_ms": median,
        "mean_ms": statistics.fmean(samples_ms),
        "std_ms": statistics.pstdev(samples_ms),
        "mad_ms": statistics.median(abs(s - median) for s in samples_ms),
        "minimum_ms": min(samples_ms),
        "maximum_ms": max(samples_ms),
    }


def round_order(round_index, archs=ARCHITECTURES):
    """AB then BA: even rounds take the architectures in order, odd rounds reversed."""
    return tuple(archs) if round_index % 2 == 0 else tuple(reversed(archs))


def make_row(arch, backend, controller, samples, memory, parameters):
    """One architecture's row. samples: {"forward": [...], "backward": [...], "forward_backward": [...]};
    memory: baseline and peak allocated / reserved bytes (torch's allocator)."""
    row = {"architecture": arch, "backend": backend, "controller": controller}
    for field, _ in MODES:
        row[field] = sample_stats(samples[field])
    row.update({
        "baseline_allocated_bytes": memory["baseline_allocated"],
        "baseline_reserved_bytes": memory["baseline_reserved"],
        "peak_allocated_bytes": memory["peak_allocated"],
        "peak_reserved_bytes": memory["peak_reserved"],
        "peak_allocated_delta_bytes": memory["peak_allocated"] - memory["baseline_allocated"],
        "peak_reserved_delta_bytes": memory["peak_reserved"] - memory["baseline_reserved"],
        "parameters": parameters,
    })
    return row


def make_case(name, shared_copied, rows):
    _, batch, length, width, rnn_width, depth = case(name)
    return {"case": name, "batch": batch, "length": length,
            "config": {"width": width, "rnn_width": rnn_width, "depth": depth},
            "shared_parameters_copied": shared_copied, "rows": rows}


def make_report(environment, cases):
    return {"schema_version": 1, "protocol": dict(PROTOCOL), "environment": environment, "cases": cases}


def samu_ratios(report):
    """{case: {mode field: SAMU median / RG-LRU median}} of a report in seed 000's schema."""
    ratios = {}
    for c in report["cases"]:
        rows = {r["architecture"]: r for r in c["rows"]}
        if "rglru" in rows and "samu" in rows:
            ratios[c["case"]] = {f: rows["samu"][f]["median_ms"] / rows["rglru"][f]["median_ms"] for f, _ in MODES}
    return ratios


def load_seed(path):
    with open(path) as f:
        return json.load(f)


def format_table(report, seed=None):
    """Per case and architecture: backend, fwd / bwd / fwd_bwd median ms, peak delta MiB; per case the
    SAMU / RG-LRU ratio of each mode beside the seed's (where the seed has the case)."""
    ours, theirs = samu_ratios(report), samu_ratios(seed) if seed else {}
    lines = [f"{'case':<17} {'arch':<6} {'backend':<44} {'fwd ms':>8} {'bwd ms':>8} {'fwd_bwd ms':>10} "
             f"{'peak +MiB':>9}"]
    for c in report["cases"]:
        for r in c["rows"]:
            lines.append(f"{c['case']:<17} {r['architecture']:<6} {r['backend']:<44} "
                         f"{r['forward']['median_ms']:>8.3f} {r['backward']['median_ms']:>8.3f} "
                         f"{r['forward_backward']['median_ms']:>10.3f} "
                         f"{r['peak_allocated_delta_bytes'] / 2**20:>9.0f}")
        if c["case"] in ours:
            mine = " / ".join(f"{ours[c['case']][f]:.3f}" for f, _ in MODES)
            seed_part = ""
            if c["case"] in theirs:
                seed_part = "   seed: " + " / ".join(f"{theirs[c['case']][f]:.3f}" for f, _ in MODES)
            lines.append(f"{'':<17} SAMU / RG-LRU (fwd / bwd / fwd_bwd): {mine}{seed_part}")
    return "\n".join(lines)
