"""Python client of scantuned: the same gRPC API as the C++ client library
(client/scantune_client.h) and the `scantune` CLI.

    import scantune
    client = scantune.Client()                       # $SCANTUNE_ADDRESS or unix:///tmp/scantune.sock
    sel = client.select("rglru", "4x2048x2048", "bf16", "fwd_bwd", deterministic=True)
    kernel = client.get_kernel("rglru", "4x2048x2048", "bf16", "fwd_bwd")
    kernel.cubin, kernel.launches, kernel.params      # what a launcher needs (README, "Launching a served kernel")

Replies are the API's protobuf messages (proto/scantune.proto: every field
with a unit carries it in its name); failures raise ScantuneError with the
daemon's status code and message. The stubs are generated at build time into
the package's _gen folder (client/CMakeLists.txt): put build/client/python
on PYTHONPATH.
"""

from scantune.client import Client, ScantuneError

__all__ = ["Client", "ScantuneError"]
