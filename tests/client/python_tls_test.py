"""The Python client against a real scantuned that listens with TLS and
bearer tokens on a real TCP port (127.0.0.1), with the fake worker standing
in for the GPU. The PKI (a CA, the daemon's certificate for 127.0.0.1 and
localhost, an unrelated CA) is made by the openssl CLI per run. Run by ctest
(tests/client) with SCANTUNED, FAKE_WORKER and PYTHONPATH set."""

import os
import shutil
import socket
import subprocess
import tempfile
import unittest

import scantune
from daemon_fixture import Daemon

TOKEN = "python-test-token-0123456789"


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _make_pki(d):
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "other_ca"):
        _openssl("req", "-x509", *ec, "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.pem", "-days", "7",
                 "-subj", f"/CN=scantune python {name}")
    _openssl("req", "-new", *ec, "-keyout", f"{d}/daemon.key", "-out", f"{d}/daemon.csr", "-subj", "/CN=localhost")
    with open(f"{d}/san.cnf", "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", f"{d}/daemon.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
             "-CAcreateserial", "-out", f"{d}/daemon.pem", "-days", "7", "-extfile", f"{d}/san.cnf")
    for name, text in (("tokens", f"# python test\n{TOKEN}\n"), ("wrong", "not-the-daemons-token-000\n")):
        with open(f"{d}/{name}", "w") as f:
            f.write(text)
        os.chmod(f"{d}/{name}", 0o600)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PythonTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = tempfile.mkdtemp(prefix="scantune-py-pki-")
        _make_pki(cls.pki)
        cls.address = f"127.0.0.1:{_free_port()}"
        p = cls.pki
        cls.daemon = Daemon(os.environ["FAKE_WORKER"], listen=cls.address,
                            flags=["--tls-cert", f"{p}/daemon.pem", "--tls-key", f"{p}/daemon.key",
                                   "--token-file", f"{p}/tokens"],
                            client_options={"tls_ca": f"{p}/ca.pem", "token_file": f"{p}/tokens"})

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.pki, ignore_errors=True)

    def client(self, **options):
        return scantune.Client(self.address, timeout_s=30, **options)

    def test_the_ca_and_a_token_get_calls_through(self):
        self.assertTrue(self.daemon.client.tls)
        self.assertEqual([d.uuid for d in self.daemon.client.devices()], ["GPU-fake-0"])
        with self.client(tls_ca=f"{self.pki}/ca.pem", token=TOKEN) as c:
            self.assertEqual(len(c.devices()), 1)

    def test_the_environment_names_the_ca_and_the_token_file(self):
        saved = {k: os.environ.get(k) for k in ("SCANTUNE_TLS_CA", "SCANTUNE_TOKEN_FILE")}
        os.environ["SCANTUNE_TLS_CA"] = f"{self.pki}/ca.pem"
        os.environ["SCANTUNE_TOKEN_FILE"] = f"{self.pki}/tokens"
        try:
            with self.client() as c:
                self.assertEqual(len(c.devices()), 1)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_a_missing_or_wrong_token_is_unauthenticated(self):
        for options in ({}, {"token_file": f"{self.pki}/wrong"}):
            with self.client(tls_ca=f"{self.pki}/ca.pem", **options) as c:
                with self.assertRaises(scantune.ScantuneError) as caught:
                    c.devices()
                self.assertEqual(caught.exception.code, "UNAUTHENTICATED", caught.exception)

    def test_plaintext_or_another_ca_never_gets_through(self):
        for options in ({}, {"tls_ca": f"{self.pki}/other_ca.pem", "token": TOKEN}):
            with self.client(**options) as c:
                with self.assertRaises(scantune.ScantuneError) as caught:
                    c.devices()
                self.assertEqual(caught.exception.code, "UNAVAILABLE", caught.exception)
        with self.assertRaises(ValueError) as caught:
            self.client(token=TOKEN)
        self.assertIn("only over TLS", str(caught.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
