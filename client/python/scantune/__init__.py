"""Python client of scantuned: the same gRPC API as the C++ client library
(client/scantune_client.h) and the `scantune` CLI.

    import scantune
    client = scantune.Client()                       # $SCANTUNE_ADDRESS or unix:///tmp/scantune.sock
    sel = client.select("rglru", "4x2048x2048", "bf16", "fwd_bwd", deterministic=True)
    kernel = client.get_kernel("rglru", "4x2048x2048", "bf16", "fwd_bwd")
    with scantune.LoadedKernel(kernel) as k:          # launch it on the job's tensors (launch.py)
        k.run("fwd", {"x": x, "ga": ga, "gx": gx, ...}, stream=torch.cuda.current_stream())
    from scantune.torch_ops import ServedScan        # as a torch op with autograd (needs torch)
    y, h_final = ServedScan(client, "rglru", (4, 2048, 2048), "bf16")(x, ga, gx, lam)

Replies are the API's protobuf messages (proto/scantune.proto: every field
with a unit carries it in its name); failures raise ScantuneError with the
daemon's status code and message. The stubs are generated at build time into
the package's _gen folder (client/CMakeLists.txt): put build/client/python
on PYTHONPATH.
"""

from scantune.client import Client, ScantuneError
from scantune.launch import LoadedKernel, pack_params

__all__ = ["Client", "LoadedKernel", "ScantuneError", "pack_params"]
