"""Session 29, fp32 decays: each named variant's outputs against the float64
reference at 1x1000x200 fp32 with h0, over several input draws (the
Python launcher's GPU test's inputs and reference, tests/client), so that
builds can be set side by side. Prints one line per (variant, seed): the
worst output and its max|out - ref| / max|ref|, and dh0's.
  SCANTUNED=... SCANTUNE_WORKER=... PYTHONPATH=<build>/client/python python3 fp32_decay.py TAG"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/client"))
import torch  # noqa: E402

import python_launch_gpu_test as g  # noqa: E402
import scantune  # noqa: E402
from daemon_fixture import Daemon  # noqa: E402

TAG = sys.argv[1]
VARIANTS = {
    "samu": ["sequential_v4_t64_p4", "lookback_v2_t256_s8_i8_o2", "lookback_v2_t256_s4_i16_o5", "chunked_v8_t256_c32"],
    "rglru": ["sequential_v4_t64_p4", "lookback_v2_t256_s8_i8_o2", "lookback_v2_t256_s8_i16_o3"],
}
SHAPE = (1, 1000, 200)
SEEDS = range(10, 16)

daemon = Daemon(os.environ["SCANTUNE_WORKER"], prefix="scantune-fp32-", wait_s=60)
try:
    for op, names in VARIANTS.items():
        for seed in SEEDS:
            inputs = g.make_inputs(op, SHAPE, "fp32", True, seed)
            ref = g.reference(op, inputs)
            for name in names:
                try:
                    kernel = daemon.client.get_kernel(op, "x".join(map(str, SHAPE)), "fp32", "fwd_bwd", variant=name,
                                                      h0=True)
                except scantune.ScantuneError as e:
                    print(f"{TAG} {op} {name}: {e}", flush=True)
                    continue
                out = g.outputs_like(op, inputs)
                values = {**inputs, **out, "batch": SHAPE[0], "length": SHAPE[1], "width": SHAPE[2]}
                with scantune.LoadedKernel(kernel) as k:
                    k.run("fwd", values)
                    k.run("bwd", values)
                    torch.cuda.synchronize()
                errors = {n: g.rel_err(t, ref[n]) for n, t in out.items() if n in ref}
                worst = max(errors, key=errors.get)
                print(f"{TAG} {op} {name} seed {seed}: worst {worst} {errors[worst]:.2e}; dh0 {errors['dh0']:.2e}; "
                      f"h_final {errors['h_final']:.2e}", flush=True)
finally:
    daemon.stop()
