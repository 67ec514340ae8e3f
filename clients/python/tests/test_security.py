"""AUTH (fencerd --requirepass, --users) and TLS (a CA and certificates
made here with openssl)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time

import pytest

import fencer


def test_requirepass(node_factory, client_factory, name):
    n = node_factory("--requirepass", "s3cret", auth={"password": "s3cret"})
    ok = client_factory([n.addr], password="s3cret")
    with ok.lock(name, ttl=5) as lk:
        assert lk.token > 0
    as_default = client_factory([n.addr], username="default", password="s3cret")
    with as_default.lock(name, ttl=5) as lk:
        assert lk.token > 0

    t0 = time.monotonic()
    with pytest.raises(fencer.AuthError) as e:
        client_factory([n.addr]).lock(name, ttl=5).acquire()
    assert e.value.code == "NOAUTH"
    with pytest.raises(fencer.AuthError) as e:
        client_factory([n.addr], password="wrong").lock(name, ttl=5).acquire()
    assert e.value.code == "WRONGPASS"
    assert time.monotonic() - t0 < 3.0, "a refusal of the credentials is not retried"


def test_users_pattern(node_factory, client_factory, tmp_path, name):
    users = tmp_path / "users"
    users.write_text("admin adminpw *\napp apppw app/*\n")
    n = node_factory("--users", str(users), "--forward-user", "admin", auth={"username": "admin", "password": "adminpw"})
    c = client_factory([n.addr], username="app", password="apppw")
    with c.lock("app/" + name, ttl=5) as lk:
        assert lk.token > 0
    with pytest.raises(fencer.NoPermError) as e:
        c.lock("other/" + name, ttl=5).acquire()
    assert e.value.code == "NOPERM"


def openssl(*args, cwd):
    exe = shutil.which("openssl")
    if exe is None:
        pytest.fail("openssl is not on PATH; on Debian: apt-get install openssl")
    r = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def pki(tmp_path):
    """A CA, a server certificate for 127.0.0.1, a client certificate."""
    d = str(tmp_path)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=fencer test CA", cwd=d)
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth"),
                     ("client", "extendedKeyUsage=clientAuth")):
        with open(os.path.join(d, who + ".ext"), "w") as f:
            f.write(ext + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", who + ".key", "-out", who + ".csr", "-subj", f"/CN=fencer test {who}", cwd=d)
        openssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", who + ".pem", "-days", "1", "-extfile", who + ".ext", cwd=d)
    return d


def tls_ready_kw(pki):
    return {"ssl": True, "ssl_ca_certs": os.path.join(pki, "ca.pem"), "ssl_cert_reqs": "required"}


def test_tls(node_factory, client_factory, pki, name):
    p = lambda f: os.path.join(pki, f)  # noqa: E731
    n = node_factory("--tls-cert-file", p("server.pem"), "--tls-key-file", p("server.key"), auth=tls_ready_kw(pki))
    ctx = ssl.create_default_context(cafile=p("ca.pem"))
    c = client_factory([n.addr], ssl=ctx)
    with c.lock(name, ttl=5) as lk:
        assert lk.token > 0

    # The system's CAs do not know ours: refused at once, not retried.
    t0 = time.monotonic()
    with pytest.raises(fencer.TLSError):
        client_factory([n.addr], ssl=True).lock(name, ttl=5).acquire()
    assert time.monotonic() - t0 < 3.0


def test_tls_client_certificate(node_factory, client_factory, pki, name):
    p = lambda f: os.path.join(pki, f)  # noqa: E731
    ready = dict(tls_ready_kw(pki), ssl_certfile=p("client.pem"), ssl_keyfile=p("client.key"))
    n = node_factory("--tls-cert-file", p("server.pem"), "--tls-key-file", p("server.key"),
                     "--tls-ca-cert-file", p("ca.pem"), auth=ready)
    ctx = ssl.create_default_context(cafile=p("ca.pem"))
    ctx.load_cert_chain(p("client.pem"), p("client.key"))
    with client_factory([n.addr], ssl=ctx).lock(name, ttl=5) as lk:
        assert lk.token > 0
    # Without a client certificate, the node refuses the handshake.
    bare = ssl.create_default_context(cafile=p("ca.pem"))
    t0 = time.monotonic()
    with pytest.raises(fencer.TLSError):
        client_factory([n.addr], ssl=bare).lock(name, ttl=5).acquire()
    assert time.monotonic() - t0 < 3.0
