"""A real scantuned on a Unix socket in a temp dir, for the Python tests of
tests/client (imported from the scripts' own folder): started with the
given worker binary, returned once it answers ListDevices, stopped (and its
dir removed) by stop(). Also InvalidArgumentAssertions, the tests' check of
an INVALID_ARGUMENT refusal."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import scantune


class Daemon:
    def __init__(self, worker, *, env=None, prefix="scantune-py-", wait_s=30, timeout_s=300, listen=None, flags=(),
                 client_options=None):
        """listen: scantuned's --listen (default a unix socket in the daemon's dir); flags: more of its flags;
        client_options: more keyword arguments of the fixture's scantune.Client (tls_ca, token, ...)."""
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.address = listen or "unix://" + os.path.join(self.dir, "s.sock")
        self.log = open(os.path.join(self.dir, "scantuned.log"), "w")
        self.process = subprocess.Popen(
            [os.environ["SCANTUNED"], "--listen", self.address, "--db", os.path.join(self.dir, "scantune.db"),
             "--worker", worker, *flags],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log)
        self.client = scantune.Client(self.address, timeout_s=timeout_s, **(client_options or {}))
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.devices = self.client.devices()
                return
            except scantune.ScantuneError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise
                time.sleep(0.1)

    def stop(self):
        self.client.close()
        if self.process.poll() is not None:  # it died under the test: say why
            with open(self.log.name) as log:
                print("scantuned exited", self.process.returncode, "; its log ends:\n" + log.read()[-4000:],
                      file=sys.stderr)
        else:
            self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class InvalidArgumentAssertions:
    """A unittest.TestCase mixin: assertInvalid(call, *fragments) expects call() to raise ScantuneError
    INVALID_ARGUMENT whose message holds every fragment, and returns the error."""

    def assertInvalid(self, call, *fragments):
        with self.assertRaises(scantune.ScantuneError) as caught:
            call()
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT", caught.exception)
        for fragment in fragments:
            self.assertIn(fragment, caught.exception.message)
        return caught.exception
