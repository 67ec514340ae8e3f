"""Fixtures: real fencerd processes (one node, three-node clusters),
redis-server and PostgreSQL, on free loopback ports, in temp dirs, stopped
when their scope ends. A missing tool fails the test with what to install.

Run from the repository root:

    FENCERD=/abs/path/fencerd /usr/bin/python3 -m pytest -q clients/python

Without FENCERD, fencerd is built once with go build.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)  # clients/python
ROOT = os.path.dirname(os.path.dirname(PKG))  # the repository root
# The package from the source tree, unless FENCER_INSTALLED=1: then the
# tests import the copy pip installed (make test-python-venv).
if os.environ.get("FENCER_INSTALLED") != "1":
    sys.path.insert(0, PKG)

import redis  # noqa: E402

from fencer._conn import HANDSHAKE  # noqa: E402  (redis-py 8 asks for RESP3 by default)

# Waits are bounded; each bound is at least twice what it takes on an idle machine.
READY_TIMEOUT = 30.0  # a node, or a cluster forming or electing
STOP_TIMEOUT = 10.0


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports that were free a moment ago (all sockets
    are held until every port is chosen, so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_for(cond, timeout: float, what: str, every: float = 0.02):
    """Poll cond() until it returns a true value; fail the test after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported if it never succeeds
            last = e
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not within {timeout}s (last error: {last!r})")
        time.sleep(every)


def raw(addr: str, **kw) -> redis.Redis:
    """A plain redis-py client of one node, for checks behind the client's back."""
    host, port = addr.rsplit(":", 1)
    kw.setdefault("socket_timeout", 5)
    return redis.Redis(host=host, port=int(port), **HANDSHAKE, **kw)


@pytest.fixture(scope="session")
def fencerd_bin(tmp_path_factory) -> str:
    path = os.environ.get("FENCERD")
    if path:
        if not os.access(path, os.X_OK):
            pytest.fail(f"FENCERD={path} is not an executable file")
        return path
    go = shutil.which("go")
    if go is None:
        pytest.fail("FENCERD is not set and go is not on PATH to build fencerd: set FENCERD=/abs/path/fencerd or install Go")
    out = str(tmp_path_factory.mktemp("bin") / "fencerd")
    r = subprocess.run([go, "build", "-o", out, "./cmd/fencerd"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"go build ./cmd/fencerd in {ROOT} failed:\n{r.stdout}{r.stderr}")
    return out


class Fencerd:
    """One fencerd process."""

    def __init__(self, bin_path: str, dirpath: str, extra=(), join=None):
        port, raft, http = free_ports(3)
        self.addr = f"127.0.0.1:{port}"
        self.http = f"127.0.0.1:{http}"
        self.dir = dirpath
        self.args = [
            bin_path,
            "--listen", self.addr,
            "--raft-listen", f"127.0.0.1:{raft}",
            "--http-listen", self.http,
            "--data-dir", os.path.join(dirpath, "data"),
            *extra,
        ]
        if join:
            self.args += ["--join", ",".join(join)]
        self.log_path = os.path.join(dirpath, "fencerd.log")
        self.proc = None

    def start(self):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def raw(self, **kw) -> redis.Redis:
        return raw(self.addr, **kw)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot exit
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def kill(self):
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()


def _leader_of(node: Fencerd, **kw):
    v = node.raw(socket_timeout=2, **kw).execute_command("FENCE.LEADER")
    return None if not v else v[1].decode()


def start_node(bin_path: str, extra=(), ready: str = "leader", auth=None) -> Fencerd:
    """Start one node; ready "leader" waits until it leads (a one-node
    cluster), "ping" until it answers PING. auth: redis-py credentials
    (password=..., username=...) for the readiness check."""
    d = tempfile.mkdtemp(prefix="fencer-py-")
    n = Fencerd(bin_path, d, extra)
    n.start()
    kw = dict(auth or {})

    def up():
        if not n.alive():
            _dead(n)
        if ready == "ping":
            return n.raw(socket_timeout=2).ping()
        return _leader_of(n, **kw) == n.addr

    try:
        wait_for(up, READY_TIMEOUT, f"fencerd at {n.addr} ready")
    except BaseException:
        n.stop()
        shutil.rmtree(d, ignore_errors=True)
        raise
    return n


def _dead(n: Fencerd):
    pytest.fail(f"fencerd exited:\n{n.log()}")


@pytest.fixture
def node_factory(fencerd_bin):
    """Start single fencerd nodes with extra flags; all stopped at the end."""
    nodes = []

    def make(*extra, ready="leader", auth=None):
        n = start_node(fencerd_bin, extra, ready, auth)
        nodes.append(n)
        return n

    yield make
    for n in nodes:
        n.stop()
        shutil.rmtree(n.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def node(fencerd_bin):
    """A one-node cluster shared by the tests of the session (each uses
    lock names of its own)."""
    n = start_node(fencerd_bin)
    yield n
    n.stop()
    shutil.rmtree(n.dir, ignore_errors=True)


class Cluster:
    """Three fencerd processes forming one Raft cluster."""

    def __init__(self, bin_path: str, size: int = 3):
        self.dir = tempfile.mkdtemp(prefix="fencer-py-cluster-")
        self.nodes: list[Fencerd] = []
        joins: list[str] = []
        for i in range(size):
            d = os.path.join(self.dir, f"n{i + 1}")
            os.makedirs(d)
            # A short request timeout: a node without a leader answers
            # NOLEADER within it, and a follower gives up on a dead leader.
            self.nodes.append(Fencerd(bin_path, d, extra=("--request-timeout", "2s"), join=list(joins) or None))
            joins.append(self.nodes[-1].addr)

    @property
    def addrs(self) -> list[str]:
        return [n.addr for n in self.nodes]

    def start(self):
        for n in self.nodes:
            n.start()
        wait_for(self._formed, READY_TIMEOUT, f"cluster of {len(self.nodes)} formed", every=0.1)

    def _formed(self):
        leaders = set()
        for n in self.nodes:
            if not n.alive():
                pytest.fail(f"fencerd {n.addr} exited:\n{n.log()}")
            r = n.raw(socket_timeout=2)
            members = r.execute_command("FENCE.MEMBERS")
            if len(members) != len(self.nodes) or any(not m[2] for m in members):
                return False
            leaders.add(_leader_of(n))
        return len(leaders) == 1 and None not in leaders

    def leader_index(self, among=None) -> int:
        """The index of the node the live nodes agree leads, waiting for one."""
        among = among if among is not None else range(len(self.nodes))

        def agreed():
            seen = {_leader_of(self.nodes[i]) for i in among}
            if len(seen) == 1 and None not in seen:
                addr = seen.pop()
                idx = self.addrs.index(addr)
                return idx + 1 if idx in among else None
            return None

        return wait_for(agreed, READY_TIMEOUT, "a leader the live nodes agree on", every=0.05) - 1

    def stop(self):
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster(fencerd_bin):
    c = Cluster(fencerd_bin)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def client_factory():
    """Make fencer Clients; all closed at the end."""
    import fencer

    clients = []

    def make(addrs, **kw):
        c = fencer.Client(addrs, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def name():
    """A lock name no other test uses."""
    return "py/" + uuid.uuid4().hex[:12]


# ---- redis-server


class RedisServer:
    def __init__(self):
        bin_path = shutil.which("redis-server")
        if bin_path is None:
            pytest.fail("redis-server is not on PATH; these tests need a real one. On Debian: apt-get install redis-server")
        self.dir = tempfile.mkdtemp(prefix="fencer-py-redis-")
        (port,) = free_ports(1)
        self.port = port
        self.proc = subprocess.Popen(
            [bin_path, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self.proc.poll() is None and redis.Redis(port=port, socket_timeout=2).ping(),
                 READY_TIMEOUT, "redis-server ready")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def redis_db(redis_server):
    """A redis-py client of the session's redis-server, flushed for the test."""
    c = redis_server.client()
    c.flushall()
    yield c
    c.close()


# ---- PostgreSQL


def _pg_bin() -> str:
    import glob

    found = sorted(
        (d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.path.exists(os.path.join(d, "initdb"))),
        key=lambda d: int(os.path.basename(os.path.dirname(d)) or 0),
    )
    if found:
        return found[-1]
    initdb = shutil.which("initdb")
    if initdb:
        return os.path.dirname(initdb)
    pytest.fail("these tests need a real PostgreSQL server (initdb, pg_ctl, postgres); on Debian: apt-get install postgresql")


class Postgres:
    """A throwaway PostgreSQL cluster, run as user postgres when we are root."""

    def __init__(self):
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            pytest.fail("psycopg2 is missing; on Debian: apt-get install python3-psycopg2, and run /usr/bin/python3")
        self.bin = _pg_bin()
        self.dir = tempfile.mkdtemp(prefix="fencer-py-pg-")
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                pytest.fail("running as root, and there is no postgres user to run the server as (apt-get install postgresql)")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            runuser = shutil.which("runuser")
            if runuser is None:
                pytest.fail("running as root and runuser (util-linux) is not on PATH")
            self.as_user = [runuser, "-u", "postgres", "--"]
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "postgres.log")
        self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        (self.port,) = free_ports(1)
        opts = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} -c fsync=off"
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", opts, "-w", "-t", "60", "start")
        self._n = 0

    def _run(self, name, *args):
        r = subprocess.run([*self.as_user, os.path.join(self.bin, name), *args], cwd=self.dir,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            log = open(self.log).read() if os.path.exists(self.log) else ""
            pytest.fail(f"{name} {args}: {r.stdout}{r.stderr}\nserver log:\n{log}")

    def dsn(self, db: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={db}"

    def new_database(self) -> str:
        import psycopg2

        self._n += 1
        db = f"t{self._n}_{uuid.uuid4().hex[:8]}"
        c = psycopg2.connect(self.dsn())
        c.autocommit = True
        with c.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
        c.close()
        return db

    def stop(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            r = subprocess.run([*self.as_user, os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w",
                                "-t", "60", "stop"], capture_output=True, timeout=120)
            if r.returncode != 0:
                subprocess.run([*self.as_user, os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "immediate",
                                "-w", "-t", "60", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    pg = Postgres()
    yield pg
    pg.stop()


@pytest.fixture
def pg(postgres):
    """A psycopg2 connection to a fresh database of the session's server."""
    import psycopg2

    conn = psycopg2.connect(postgres.dsn(postgres.new_database()))
    yield conn
    conn.close()
