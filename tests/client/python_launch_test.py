"""The Python launcher (client/python/scantune/launch.py) without a GPU:
packing the by-value parameter struct BY FIELD NAME against the layouts a
real scantuned serves (GetKernel compiles with the real NVRTC; the fake
worker stands in for the GPU) and against hand-made layouts for the error
cases; the CUlaunchConfig built per launch; that importing and packing need
no driver, and that a missing driver is a clear error. Run by ctest
(tests/client, not labelled gpu) with SCANTUNED, FAKE_WORKER and PYTHONPATH
set. The launches themselves: python_launch_gpu_test.py (label gpu)."""

import ctypes
import os
import struct
import subprocess
import sys
import unittest

import scantune
from scantune import launch
from scantune.client import pb
from daemon_fixture import Daemon, InvalidArgumentAssertions

# The served kernels: plain launches; PDL with a workspace zeroed once; clusters of 2 (W = 200: two 128-channel strips).
LINEAR = ("linear_scan", "chunked_v4_t128_c64", "2x256x96", "fp32", False)
RGLRU = ("rglru", "lookback_v2_t256_s8_i8_o2", "2x256x96", "bf16", True)
SAMU = ("samu", "lookback_v2_t256_s4_i16_o5", "1x1000x200", "fp32", True)

# The parameter structs as kernels_src/*_params.h declare them: pointers in
# order from offset 0, then the i64 sizes.
POINTERS = {
    "linear_scan": ["a", "x", "h", "h0", "h_final", "dh", "da", "dx", "dh0", "workspace"],
    "rglru": ["x", "ga", "gx", "lambda", "h", "h0", "h_final", "dh", "dx", "dga", "dgx", "dlambda", "dh0", "workspace"],
    "samu": ["x", "lambda", "beta", "gamma", "controller", "y", "h", "ctrl", "h0", "h_final", "dy", "dx", "dlambda",
             "dbeta", "dgamma", "dcontroller", "dh0", "workspace"],
}
NULLABLE = {"h0", "h_final", "dh0"}


class FakeTensor:
    """What the launcher reads of a torch tensor."""

    def __init__(self, address, is_cuda=True, contiguous=True):
        self.address, self.is_cuda, self.contiguous = address, is_cuda, contiguous

    def data_ptr(self):
        return self.address

    def is_contiguous(self):
        return self.contiguous


def handmade(fields, size, variant="handmade"):
    """A KernelResponse carrying only a layout: fields (name, offset, size, type, meaning)."""
    kernel = pb.KernelResponse(variant=variant, params_size_bytes=size)
    for name, offset, nbytes, kind, meaning in fields:
        kernel.params.add(name=name, offset_bytes=offset, size_bytes=nbytes, type=kind, meaning=meaning)
    return kernel


def values_for(kernel, shape):
    """A value for every field: distinct device addresses, the shape's sizes."""
    batch, length, width = (int(n) for n in shape.split("x"))
    sizes = {"batch": batch, "length": length, "width": width}
    return {f.name: sizes[f.name] if f.type != "ptr" else 0x7F0000000000 + 0x100000 * i
            for i, f in enumerate(kernel.params)}


class PythonLaunchTest(InvalidArgumentAssertions, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(os.environ["FAKE_WORKER"], prefix="scantune-pylaunch-")
        cls.client = cls.daemon.client
        cls.served = {}
        for op, variant, shape, dtype, h0 in (LINEAR, RGLRU, SAMU):
            cls.served[op] = (cls.client.get_kernel(op, shape, dtype, "fwd_bwd", variant=variant, h0=h0), shape)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def test_served_layouts_are_the_kernels_structs(self):
        for op, names in POINTERS.items():
            kernel, _ = self.served[op]
            with self.subTest(op=op):
                expected = [(n, 8 * i, 8, "ptr") for i, n in enumerate(names)]
                expected += [(n, 8 * (len(names) + i), 8, "i64") for i, n in enumerate(("batch", "length", "width"))]
                self.assertEqual([(f.name, f.offset_bytes, f.size_bytes, f.type) for f in kernel.params], expected)
                self.assertEqual(kernel.params_size_bytes, 8 * (len(names) + 3))
                self.assertEqual({f.name for f in kernel.params if launch.field_allows_null(f)}, NULLABLE)

    def test_every_served_struct_packs_by_name(self):
        for op, (kernel, shape) in self.served.items():
            with self.subTest(op=op):
                values = values_for(kernel, shape)
                values["x"] = FakeTensor(0x7E0000001000)  # a tensor: its data_ptr()
                values["h0"] = None
                packed = scantune.pack_params(kernel, values)
                self.assertIsInstance(packed, bytes)
                self.assertEqual(len(packed), kernel.params_size_bytes)
                for f in kernel.params:
                    want = {"x": 0x7E0000001000, "h0": 0}.get(f.name, values[f.name])
                    self.assertEqual(struct.unpack_from("<q" if f.type == "i64" else "<Q", packed, f.offset_bytes)[0],
                                     want, f.name)
                # The order of `values` is irrelevant: only names count.
                self.assertEqual(scantune.pack_params(kernel, dict(reversed(list(values.items())))), packed)

    def test_null_only_where_the_meaning_allows_it(self):
        kernel, shape = self.served["rglru"]
        values = values_for(kernel, shape)
        for name in ("h0", "h_final", "dh0"):  # "; null: zero", "; null: not written"
            scantune.pack_params(kernel, {**values, name: None})
            scantune.pack_params(kernel, {**values, name: 0})
        for name in ("x", "lambda", "h", "dlambda", "workspace"):
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, name: None}),
                               f"parameter field '{name}'", "does not accept null")
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, name: 0}), "does not accept null")
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, name: FakeTensor(0)}),
                               "does not accept null")

    def test_missing_and_unknown_fields_are_named(self):
        kernel, shape = self.served["samu"]
        values = values_for(kernel, shape)
        for name in ("dcontroller", "width", "h0"):
            missing = {k: v for k, v in values.items() if k != name}
            error = self.assertInvalid(lambda: scantune.pack_params(kernel, missing), f"parameter field '{name}'",
                                       "has no value")
            self.assertEqual("pass None for null" in error.message, name == "h0")
        self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, "dz": FakeTensor(0x1000)}),
                           "has no field 'dz'", kernel.variant)
        self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, "dga": 0x1000}), "has no field 'dga'")
        # A null for a field the struct does not have is nothing to pass (C++: ParamValue::Null()).
        self.assertEqual(scantune.pack_params(kernel, {**values, "dz": None}), scantune.pack_params(kernel, values))

    def test_sizes_other_than_the_served_problems_are_refused(self):
        for op, (kernel, shape) in self.served.items():
            with self.subTest(op=op):
                batch, length, width = (int(n) for n in shape.split("x"))
                served = kernel.problem
                self.assertEqual((served.op, served.shape.batch, served.shape.length, served.shape.width),
                                 (op, batch, length, width))
                values = values_for(kernel, shape)
                for name, other in (("batch", batch + 1), ("length", 2 * length), ("width", width - 8)):
                    self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, name: other}),
                                       f"parameter field '{name}' is {other}", f"{op} {shape}", kernel.variant)
        # A response without a problem (a daemon from before the field) is not checked.
        kernel, shape = self.served["linear_scan"]
        older = pb.KernelResponse()
        older.CopyFrom(kernel)
        older.ClearField("problem")
        self.assertEqual(len(scantune.pack_params(older, {**values_for(older, shape), "width": 8})),
                         older.params_size_bytes)

    def test_mistyped_values_are_refused(self):
        kernel, shape = self.served["linear_scan"]
        values = values_for(kernel, shape)
        for name, bad, fragment in [
                ("batch", FakeTensor(0x1000), "is an integer"), ("batch", None, "is an integer"),
                ("length", 256.0, "not float"), ("width", True, "not bool"), ("width", "96", "not str"),
                ("x", 1.5, "is a pointer"), ("x", "0x1000", "is a pointer"), ("a", True, "is a pointer"),
                ("x", FakeTensor(0x1000, is_cuda=False), "host memory"),
                ("x", FakeTensor(0x1000, contiguous=False), "non-contiguous")]:
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, name: bad}),
                               f"parameter field '{name}'", fragment)

    def test_integers_and_addresses_must_fit(self):
        served, shape = self.served["linear_scan"]
        kernel = pb.KernelResponse()  # without the served problem, whose sizes would refuse these first
        kernel.CopyFrom(served)
        kernel.ClearField("problem")
        values = values_for(kernel, shape)
        for good in (2 ** 63 - 1, -2 ** 63, 0):
            packed = scantune.pack_params(kernel, {**values, "length": good})
            self.assertEqual(struct.unpack_from("<q", packed, 88)[0], good)
        for bad in (2 ** 63, -2 ** 63 - 1):
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, "length": bad}),
                               "parameter field 'length'", f"cannot hold {bad} in 8 bytes")
        packed = scantune.pack_params(kernel, {**values, "x": 2 ** 64 - 1})
        self.assertEqual(packed[8:16], b"\xff" * 8)
        for bad in (2 ** 64, -1):
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**values, "x": bad}), "parameter field 'x'",
                               f"cannot hold the address {bad}")

    def test_handmade_layout_with_4_and_8_byte_fields_and_padding(self):
        kernel = handmade([("p", 0, 8, "ptr", "input"), ("q", 8, 8, "ptr", "output, optional"),
                           ("n", 16, 4, "i32", "count"), ("u", 20, 4, "u32", "flags"), ("m", 24, 8, "i64", "big")],
                          40)
        packed = scantune.pack_params(kernel, {"p": 0x1234, "q": None, "n": -5, "u": 2 ** 32 - 1, "m": -2})
        self.assertEqual(packed, struct.pack("<QQiIq", 0x1234, 0, -5, 2 ** 32 - 1, -2) + bytes(8))
        good = {"p": 1, "q": 2, "n": 0, "u": 0, "m": 0}
        for name, value in (("n", 2 ** 31 - 1), ("n", -2 ** 31), ("u", 0)):
            scantune.pack_params(kernel, {**good, name: value})
        for name, value in (("n", 2 ** 31), ("n", -2 ** 31 - 1), ("u", 2 ** 32), ("u", -1)):
            self.assertInvalid(lambda: scantune.pack_params(kernel, {**good, name: value}),
                               f"parameter field '{name}'", f"cannot hold {value} in 4 bytes")

    def test_broken_layouts_are_refused(self):
        one = {"p": 0x1000, "n": 1}
        for fields, size, fragments in [
                ([("p", 0, 8, "ptr", "x"), ("p", 8, 8, "ptr", "x")], 16, ["'p'", "appears twice"]),
                ([("p", 0, 8, "ptr", "x"), ("n", 8, 8, "i64", "n")], 12, ["'n'", "runs past the struct's 12 bytes"]),
                ([("p", 0, 4, "ptr", "x")], 8, ["'p'", "pointer of 4 bytes"]),
                ([("n", 0, 2, "i16", "n")], 8, ["'n'", "integer of 2 bytes"]),
                ([], 8, ["serves no parameter layout"])]:
            with self.subTest(fragments=fragments):
                values = {f[0]: one[f[0]] for f in fields}
                self.assertInvalid(lambda: scantune.pack_params(handmade(fields, size), values), *fragments)

    def test_launch_configs_follow_the_plan(self):
        # CUlaunchConfig / CUlaunchAttribute as cuda.h (CUDA 12, 13) lays them out.
        self.assertEqual(ctypes.sizeof(launch._LaunchAttribute), 72)
        self.assertEqual(launch._LaunchAttribute.value.offset, 8)
        self.assertEqual(ctypes.sizeof(launch._LaunchConfig), 56)
        self.assertEqual([getattr(launch._LaunchConfig, f).offset for f in ("sharedMemBytes", "hStream", "attrs",
                                                                            "numAttrs")], [24, 32, 40, 48])
        kernel, _ = self.served["samu"]  # fwd / bwd: PDL and clusters of 2; the finalize: PDL alone
        plain, _ = self.served["linear_scan"]
        seen = set()
        for served in (kernel.launches[0], kernel.launches[2], plain.launches[0]):
            config, attrs = launch.launch_config(served)
            raw = bytes(attrs)
            self.assertEqual([config.gridDimX, config.gridDimY, config.gridDimZ], list(served.grid))
            self.assertEqual([config.blockDimX, config.blockDimY, config.blockDimZ], list(served.block))
            self.assertEqual(config.sharedMemBytes, served.shared_bytes)
            self.assertIsNone(config.hStream)
            self.assertEqual(ctypes.addressof(config.attrs.contents), ctypes.addressof(attrs))
            expected = []
            if served.dependent_launch:
                expected.append((6, struct.pack("<i", 1)))  # PROGRAMMATIC_STREAM_SERIALIZATION, allowed
            if served.cluster_x > 1:
                expected.append((4, struct.pack("<III", served.cluster_x, 1, 1)))  # CLUSTER_DIMENSION
            self.assertEqual(config.numAttrs, len(expected))
            for i, (attribute, value) in enumerate(expected):
                self.assertEqual(struct.unpack_from("<i", raw, 72 * i)[0], attribute)
                self.assertEqual(raw[72 * i + 8:72 * i + 8 + len(value)], value)
            seen.add((served.dependent_launch, served.cluster_x))
        self.assertEqual(seen, {(True, 2), (True, 0), (False, 0)})

    def test_import_and_packing_need_no_driver(self):
        kernel, shape = self.served["rglru"]
        code = ("import sys, scantune; from scantune.client import pb\n"
                "k = pb.KernelResponse.FromString(sys.stdin.buffer.read())\n"
                f"v = {values_for(kernel, shape)!r}\n"
                "assert len(scantune.pack_params(k, v)) == k.params_size_bytes\n"
                "print('libcuda' in open('/proc/self/maps').read())\n")
        out = subprocess.run([sys.executable, "-c", code], input=kernel.SerializeToString(), capture_output=True,
                             check=True, env=dict(os.environ))
        self.assertEqual(out.stdout.decode().strip(), "False", out.stderr.decode())

    def test_a_missing_driver_is_a_clear_error(self):
        kernel, _ = self.served["linear_scan"]
        with self.assertRaises(scantune.ScantuneError) as caught:
            scantune.LoadedKernel(kernel, library="libscantune-no-such-driver.so.1")
        self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")
        self.assertIn("cannot load the CUDA driver (libscantune-no-such-driver.so.1)", caught.exception.message)
        try:
            ctypes.CDLL(launch.LIBCUDA)
        except OSError:  # no driver here (CI): the default library fails the same way
            with self.assertRaises(scantune.ScantuneError) as caught:
                scantune.LoadedKernel(kernel)
            self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")
            self.assertIn("libcuda.so.1", caught.exception.message)

    def test_a_response_the_launcher_cannot_run_is_refused_before_the_driver(self):
        kernel, _ = self.served["samu"]
        broken = pb.KernelResponse()
        broken.CopyFrom(kernel)
        broken.ClearField("cubin")
        self.assertInvalid(lambda: scantune.LoadedKernel(broken, library="none.so"), "carries no cubin")
        broken.CopyFrom(kernel)
        broken.ClearField("launches")
        self.assertInvalid(lambda: scantune.LoadedKernel(broken, library="none.so"), "has no launches")
        broken.CopyFrom(kernel)
        broken.workspace_zero_bytes = broken.workspace_bytes + 1
        self.assertInvalid(lambda: scantune.LoadedKernel(broken, library="none.so"), "exceeds workspace_bytes")
        broken.CopyFrom(kernel)
        broken.launches[0].grid[0] += 1
        self.assertInvalid(lambda: scantune.LoadedKernel(broken, library="none.so"), "not a multiple of its cluster")
        small = FakeTensor(0x1000)
        small.numel, small.element_size = (lambda: kernel.workspace_bytes - 1), (lambda: 1)
        self.assertInvalid(lambda: scantune.LoadedKernel(kernel, workspace=small, library="none.so"),
                           f"the kernel needs {kernel.workspace_bytes}")
        self.assertInvalid(lambda: scantune.LoadedKernel(kernel, workspace=0, library="none.so"), "workspace is null")
        self.assertInvalid(lambda: scantune.LoadedKernel(kernel, workspace=FakeTensor(0x1000, is_cuda=False),
                                                         library="none.so"), "host memory")


if __name__ == "__main__":
    unittest.main(verbosity=2)
