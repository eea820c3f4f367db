"""ServedScan (client/python/scantune/torch_ops.py) without torch or a GPU:
its argument checks, and the fields its forward and backward hand to the
launcher, packed against the layouts a real scantuned serves (GetKernel
compiles with the real NVRTC; the fake worker stands in for the GPU).
FakeTorch (tests/client/fake_torch) stands in for torch and a recording
stand-in for LoadedKernel, which packs each phase's fields by name
(launch.pack_params: every field known, null only where the field's meaning
allows). Run by ctest (not labelled gpu) with SCANTUNED, FAKE_WORKER and
PYTHONPATH set. The real launches: python_launch_gpu_test.py (label gpu)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_torch"))
import torch  # noqa: E402  (FakeTorch)

import scantune  # noqa: E402
import scantune.torch_ops as ops  # noqa: E402
from scantune import launch  # noqa: E402
from daemon_fixture import Daemon, InvalidArgumentAssertions  # noqa: E402

assert not hasattr(torch, "__version__"), "FakeTorch, not torch"


class RecordingKernel:
    """Stands in for LoadedKernel: packs each run's fields (the packing is the real one) and keeps them."""
    runs = []

    def __init__(self, kernel):
        self.kernel = kernel

    def prepare_workspace(self, workspace, stream):
        pass

    def run(self, phase, values, stream=None, workspace=None):
        launch.pack_params(self.kernel, dict(values, workspace=workspace))
        RecordingKernel.runs.append((phase, dict(values)))

    def close(self):
        pass


def act(*shape):
    return torch.empty(shape, dtype=torch.bfloat16)


def f32(*shape):
    return torch.empty(shape, dtype=torch.float32)


B, L, D, N = 2, 300, 40, 16
SSM_VARIANTS = ("tscan_d8_w1_i8_f1", "tscan_d8_w1_i4", "fused_d32_s4_c8")


class ServedScanTest(InvalidArgumentAssertions, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.loaded_kernel = ops.LoadedKernel
        ops.LoadedKernel = RecordingKernel
        cls.daemon = Daemon(os.environ["FAKE_WORKER"], prefix="scantune-torchops-")
        cls.client = cls.daemon.client

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        ops.LoadedKernel = cls.loaded_kernel

    def run_both(self, scan, inputs, h0, **optional):
        """Forward, then the backward with the forward's context: (out, h_final, grads, fwd fields, bwd fields)."""
        out, h_final = scan(*inputs, h0=h0, **optional)
        grads = ops._ScanFn.backward(torch.autograd.Function.last_context, torch.empty_like(out), None)
        (fwd_phase, fwd), (bwd_phase, bwd) = RecordingKernel.runs[-2:]
        self.assertEqual((fwd_phase, bwd_phase), ("fwd", "bwd"))
        return out, h_final, grads, fwd, bwd

    def test_selective_scan_in_mambas_order_with_and_without_the_options(self):
        for options in (False, True):
            opts = dict(state=N, delta_bias=options, delta_softplus=options, z_gate=options)
            for variant in SSM_VARIANTS:
                with self.subTest(variant=variant, options=options):
                    kernel = self.client.get_kernel("selective_scan", (B, L, D), "bf16", "fwd_bwd", variant=variant,
                                                    h0=True, **opts)
                    scan = ops.ServedScan(None, "selective_scan", (B, L, D), "bf16", kernel=kernel, **opts)
                    names = ("u", "delta", "A", "Bm", "Cm", "Dv") + (("z", "delta_bias") if options else ())
                    self.assertEqual(scan.names, names)
                    inputs = [act(B, L, D), act(B, L, D), f32(D, N), act(B, L, N), act(B, L, N), f32(D)]
                    optional = dict(z=act(B, L, D), delta_bias=f32(D)) if options else {}
                    y, h_final, grads, fwd, bwd = self.run_both(scan, inputs, f32(B, D, N), **optional)
                    self.assertEqual((y.shape, y.dtype), ((B, L, D), torch.bfloat16))
                    self.assertEqual((h_final.shape, h_final.dtype), ((B, D, N), torch.float32))
                    self.assertIsNone(grads[0])
                    self.assertEqual(grads[1].shape, (B, D, N))  # dh0
                    given = inputs + list(optional.values())
                    self.assertEqual([(g.shape, g.dtype) for g in grads[2:]], [(t.shape, t.dtype) for t in given])
                    self.assertEqual((fwd["batch"], fwd["length"], fwd["dim"], fwd["state"]), (B, L, D, N))
                    for name, t in zip(names, given):
                        self.assertIs(fwd[name], t)
                        self.assertIs(bwd[name], t)
                    # The backward writes each gradient into the tensor it returns for that input.
                    self.assertEqual([bwd["d" + n] for n in names], list(grads[2:]))
                    self.assertIs(bwd["dh0"], grads[1])
                    self.assertIs(bwd["y"], y)
                    absent = () if options else ("z", "delta_bias")
                    for name in absent:
                        self.assertIsNone(fwd[name])
                        self.assertIsNone(bwd["d" + name])

    def test_selective_scan_refuses_what_the_problem_does_not_have(self):
        opts = dict(state=N, delta_bias=True, delta_softplus=True, z_gate=True)
        kernel = self.client.get_kernel("selective_scan", (B, L, D), "bf16", "fwd_bwd", variant=SSM_VARIANTS[0],
                                        h0=True, **opts)
        scan = ops.ServedScan(None, "selective_scan", (B, L, D), "bf16", kernel=kernel, **opts)
        inputs = [act(B, L, D), act(B, L, D), f32(D, N), act(B, L, N), act(B, L, N), f32(D)]
        self.assertInvalid(lambda: scan(*inputs, delta_bias=f32(D)), "z_gate")  # the gate's z left out
        self.assertInvalid(lambda: scan(*inputs[:-1], z=act(B, L, D), delta_bias=f32(D)), "takes 6 inputs")
        self.assertInvalid(lambda: scan(*inputs, z=act(B, L, D), delta_bias=f32(D), gate=f32(D)), "no input 'gate'")
        self.assertInvalid(lambda: scan(*inputs[:5], f32(D + 1), z=act(B, L, D), delta_bias=f32(D)), "Dv", "(40,)")
        self.assertInvalid(lambda: scan(*inputs, z=act(B, L, D), delta_bias=f32(D), h0=f32(B, D)), "h0", "(2, 40, 16)")
        host = torch.Tensor((B, L, N), torch.bfloat16, device="cpu")
        self.assertInvalid(lambda: scan(*inputs[:3], host, *inputs[4:], z=act(B, L, D), delta_bias=f32(D)), "on the host")
        plain = ops.ServedScan(None, "selective_scan", (B, L, D), "bf16", kernel=self.client.get_kernel(
            "selective_scan", (B, L, D), "bf16", "fwd_bwd", variant=SSM_VARIANTS[1], state=N), state=N)
        self.assertInvalid(lambda: plain(*inputs, z=act(B, L, D)), "no z_gate")
        self.assertInvalid(lambda: ops.ServedScan(None, "samu", (B, L, D), "bf16", kernel=kernel, state=16),
                           "selective_scan's options")
        self.assertInvalid(lambda: ops.ServedScan(None, "mamba", (B, L, D), "bf16", kernel=kernel), "mamba")

    def test_the_gated_ops_and_linear_scan_still_pack(self):
        cases = (("linear_scan", "chunked_v4_t128_c64", ("a", "x")),
                 ("rglru", "lookback_v2_t256_s8_i8_o2", ("x", "ga", "gx", "lambda")),
                 ("samu", "chunked_v8_t256_c32", ("x", "lambda", "beta", "gamma", "controller")))
        shape = (2, 64, 256)
        for op, variant, names in cases:
            with self.subTest(op=op):
                kernel = self.client.get_kernel(op, shape, "bf16", "fwd_bwd", variant=variant, h0=True)
                scan = ops.ServedScan(None, op, shape, "bf16", kernel=kernel)
                self.assertEqual(scan.names, names)
                inputs = [act(*shape) if scan.tensor_dtype(n) == torch.bfloat16 else f32(*scan.tensor_shape(n))
                          for n in names]
                out, h_final, grads, fwd, bwd = self.run_both(scan, inputs, f32(2, 256))
                self.assertEqual((out.shape, h_final.shape), (shape, (2, 256)))
                self.assertEqual([g.shape for g in grads[2:]], [t.shape for t in inputs])
                self.assertEqual((fwd["batch"], fwd["length"], fwd["width"]), shape)
                if op == "samu":  # its forward writes h and the control values for the backward
                    self.assertEqual(fwd["ctrl"].shape, (2, 64, 2))
                    self.assertIs(bwd["ctrl"], fwd["ctrl"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
