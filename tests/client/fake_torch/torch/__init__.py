"""FakeTorch: a stand-in for the few parts of torch that scantune.torch_ops
touches (tensors with a shape, a dtype and a device address; empty;
autograd.Function.apply calling forward with a context; the current stream),
for python_torch_ops_test.py on machines without torch or a GPU (CI). No
arithmetic: the launches themselves go to a recording stand-in of
LoadedKernel there, and the real ones are python_launch_gpu_test.py's."""

import itertools

_addresses = itertools.count(1)


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


float32, bfloat16, float16, uint8 = dtype("float32"), dtype("bfloat16"), dtype("float16"), dtype("uint8")


class Tensor:
    def __init__(self, shape, dt, device="cuda", contiguous=True):
        self.shape, self.dtype, self.device = tuple(shape), dt, device
        self.is_cuda = device == "cuda"
        self._contiguous = contiguous
        self._address = 0x7F0000000000 + 0x1000000 * next(_addresses)

    def is_contiguous(self):
        return self._contiguous

    def data_ptr(self):
        return self._address

    def contiguous(self):
        return self if self._contiguous else Tensor(self.shape, self.dtype, self.device)

    def to(self, dt):
        return Tensor(self.shape, dt, self.device)


def empty(*shape, dtype=float32, device="cuda"):
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    return Tensor(shape, dtype, device)


def empty_like(t):
    return Tensor(t.shape, t.dtype, t.device)


class _Stream:
    cuda_stream = 0


class cuda:
    @staticmethod
    def current_stream():
        return _Stream()


class _Context:
    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        pass


class autograd:
    class Function:
        last_context = None  # the context of the latest apply, for the test to run backward with

        @classmethod
        def apply(cls, *args):
            autograd.Function.last_context = _Context()
            return cls.forward(autograd.Function.last_context, *args)
