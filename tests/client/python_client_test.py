"""The Python client against a real scantuned on a real Unix socket, with
the fake worker (a test double standing in for the GPU worker: no GPU in CI)
and the real NVRTC compile behind GetKernel. Run by ctest (tests/client)
with SCANTUNED, FAKE_WORKER and PYTHONPATH set."""

import os
import unittest

import scantune
from daemon_fixture import Daemon

SEQ = "sequential_v2_t128_p2"
CHUNKED = "chunked_v4_t128_c64"
LOOKBACK = "lookbacksmem_v4_t128_c64_i256_o2"


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = dict(os.environ)
        # The fake worker's timings: the look-back fastest, chunked the fastest deterministic one.
        env["SCANTUNE_FAKE_TIMES"] = f"{LOOKBACK}=0.2,{CHUNKED}=0.5,{SEQ}=0.9"
        cls.daemon = Daemon(os.environ["FAKE_WORKER"], env=env, timeout_s=120)
        cls.client = cls.daemon.client

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_1_devices_are_the_fake_gpu(self):
        devices = self.client.devices()
        self.assertEqual(len(devices), 1)
        self.assertIn("test double", devices[0].name)

    def test_2_an_untuned_problem_is_not_found(self):
        with self.assertRaises(scantune.ScantuneError) as caught:
            self.client.select("linear_scan", "2x256x256", "fp32", "fwd")
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.assertIn("linear_scan/2x256x256/fp32/fwd", caught.exception.message)

    def test_3_tune_then_select_both_selections_and_get_the_kernel(self):
        stages = []
        tuned = self.client.tune("linear_scan", "2x256x256", "fp32", "fwd", variants=[SEQ, CHUNKED, LOOKBACK],
                                 progress=lambda p: stages.append(scantune.client.pb.TuneProgress.Stage.Name(p.stage)))
        self.assertEqual(tuned.variant, LOOKBACK)
        self.assertEqual(stages[-1], "DONE")
        self.assertIn("TIMING", stages)

        ordinary = self.client.select("linear_scan", (2, 256, 256), "fp32", "fwd")
        self.assertEqual(ordinary.variant, LOOKBACK)
        self.assertFalse(ordinary.deterministic)
        self.assertFalse(ordinary.stale)
        deterministic = self.client.select("linear_scan", "2x256x256", "fp32", "fwd", deterministic=True)
        self.assertEqual(deterministic.variant, CHUNKED)
        self.assertTrue(deterministic.deterministic)
        near = self.client.select("linear_scan", "2x300x256", "fp32", "fwd", on_miss="nearest")
        self.assertTrue(near.nearest)
        self.assertEqual(near.tuned_shape.length, 256)

        kernel = self.client.get_kernel("linear_scan", "2x256x256", "fp32", "fwd", deterministic=True)
        self.assertEqual(kernel.variant, CHUNKED)
        self.assertGreater(len(kernel.cubin), 1000)
        self.assertEqual(kernel.cubin[:4], b"\x7fELF")
        self.assertTrue(kernel.launches)
        self.assertTrue(all(launch.phase == "fwd" and launch.entry for launch in kernel.launches))
        self.assertGreater(kernel.params_size_bytes, 0)
        self.assertTrue(kernel.selection.deterministic)
        served = kernel.problem  # what the cubin and launches are for
        self.assertEqual((served.op, served.shape.length, served.mode), ("linear_scan", 256, scantune.client.pb.FWD))

        records = list(self.client.records(op="linear_scan", page_size=2))
        self.assertGreaterEqual(len(records), 3)  # one per candidate, plus the re-timing's
        self.assertEqual([r.id for r in records], sorted((r.id for r in records), reverse=True))
        ok = list(self.client.records(op="linear_scan", state="OK", variant=CHUNKED))
        self.assertTrue(ok)
        self.assertEqual(self.client.record(ok[0].id).variant, CHUNKED)

        listed = list(self.client.selections(op="linear_scan", shape="2x256x256", page_size=1))
        self.assertEqual(sorted((s.deterministic, s.variant) for s in listed), [(False, LOOKBACK), (True, CHUNKED)])
        self.assertFalse(any(s.stale for s in listed))
        self.assertEqual({s.record_id for s in listed}, {ordinary.record_id, deterministic.record_id})
        only = list(self.client.selections(deterministic_only=True, dtype="fp32", mode="fwd"))
        self.assertEqual([s.variant for s in only], [CHUNKED])
        self.assertEqual(list(self.client.selections(mode="bwd")), [])
        history = list(self.client.selections(op="linear_scan", history=True))
        self.assertEqual({(s.deterministic, s.variant) for s in history}, {(False, LOOKBACK), (True, CHUNKED)})
        self.assertFalse(any(s.superseded for s in history))

    def test_4_bad_input_is_a_clear_error(self):
        with self.assertRaises(scantune.ScantuneError) as caught:
            self.client.select("linear_scan", "0x256x256", "fp32", "fwd")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(scantune.ScantuneError) as caught:
            self.client.select("no_such_op", "2x256x256", "fp32", "fwd")
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ValueError):
            self.client.select("linear_scan", "2x256", "fp32", "fwd")
        with self.assertRaises(ValueError):
            self.client.select("linear_scan", "2x256x256", "int8", "fwd")
        with self.assertRaises(scantune.ScantuneError) as caught:
            self.client.record(10 ** 12)
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        with self.assertRaises(ValueError):
            list(self.client.selections(dtype="int8"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
