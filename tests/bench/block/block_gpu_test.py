"""Seed 000's block on the GPU (ctest label gpu): a real scantuned with the
real worker serves named rglru and samu kernels (GetKernel), the block of
bench/block runs them through ServedScan, and its output and input gradient
(and in fp32 every parameter gradient) must match the same block in float64
with DESIGN.md's recurrence as its scan (block_bench.run_check: fp32 within
1e-4, bf16 autocast within 5e-2). Then the bench itself runs end to end at
seed 000's first case with one sample (on_miss=tune: the daemon tunes the two
problems over the named variants first) and must write a report in seed 000's
schema with the selected backends. Exits 77 (skipped) without torch or a GPU."""

import json
import os
import sys
import tempfile
import unittest

from torch_gpu import require_torch_gpu

torch = require_torch_gpu()

from daemon_fixture import Daemon  # noqa: E402

sys.path.insert(0, os.environ["SCANTUNE_BLOCK_DIR"])
import block_bench  # noqa: E402
import seed000  # noqa: E402

# One fast variant per problem at seed 000's first case (session 29's selections), so the tune takes seconds.
TUNE_VARIANTS = {"rglru": ["lookback_v2_t256_s8_i16_o3"], "samu": ["chunked_v8_t256_c32_l64_y1"]}


class BlockBenchGpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(os.environ["SCANTUNE_WORKER"], prefix="scantune-block-gpu-", wait_s=60)
        assert cls.daemon.devices, "the daemon's worker found no GPU"

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_the_block_matches_its_float64_reference(self):
        self.assertEqual(block_bench.run_check(self.daemon.client), 0)

    def test_the_bench_writes_seed_000s_schema_with_the_selected_backends(self):
        name, batch, length, _, rnn_width, _ = seed000.CASES[0]
        for arch, variants in TUNE_VARIANTS.items():
            self.daemon.client.tune(arch, (batch, length, rnn_width), "bf16", "fwd_bwd", variants=variants)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "block.json")
            status = block_bench.main(["--address", self.daemon.address, "--cases", name, "--samples", "2",
                                       "--warmup", "1", "--out", out])
            self.assertEqual(status, 0)
            with open(out) as f:
                report = json.load(f)
        self.assertEqual(report["protocol"], seed000.PROTOCOL)
        (case,) = report["cases"]
        self.assertEqual(case["case"], name)
        self.assertEqual(case["shared_parameters_copied"], 50366464)
        rows = {r["architecture"]: r for r in case["rows"]}
        for arch, variants in TUNE_VARIANTS.items():
            self.assertEqual(rows[arch]["backend"], variants[0])
            for field, _ in seed000.MODES:
                self.assertEqual(len(rows[arch][field]["samples_ms"]), 2)
                self.assertGreater(rows[arch][field]["median_ms"], 0)
            self.assertGreater(rows[arch]["peak_allocated_delta_bytes"], 0)
        self.assertEqual(rows["rglru"]["parameters"], 50896896)
        self.assertEqual(rows["samu"]["parameters"], 50372612)


if __name__ == "__main__":
    unittest.main()
