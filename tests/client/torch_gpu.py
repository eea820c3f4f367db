"""The GPU tests' torch (imported from the scripts' own folder, or tests/client
on PYTHONPATH): imports nothing else, so that a python without torch, grpc
or a GPU skips the test before anything fails to import."""

import sys


def require_torch_gpu():
    """torch, for a GPU test; exits 77 (ctest: skipped) where this python has no torch or torch sees no GPU."""
    try:
        import torch
    except ModuleNotFoundError:
        print("skipped: no torch for", sys.executable)
        sys.exit(77)
    if not torch.cuda.is_available():
        print("skipped: torch sees no GPU")
        sys.exit(77)
    return torch
