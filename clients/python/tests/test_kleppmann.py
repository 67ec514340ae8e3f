"""Kleppmann's scenario, run for real: a holder paused past its TTL (SIGSTOP)
wakes up and writes with its old token after a second client took the lock
and wrote; the fenced stores refuse the late write."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

from conftest import PKG

HOLDER = os.path.join(os.path.dirname(__file__), "holder.py")


def readline(proc, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"the holder printed nothing within {timeout}s"
    return proc.stdout.readline().decode().strip()


def test_paused_holder_is_fenced_off(node, client_factory, name, redis_server, postgres, pg):
    paused_holder_is_fenced_off(node, client_factory, name, redis_server, pg, "threaded")


def paused_holder_is_fenced_off(node, client_factory, name, redis_server, pg, mode: str):
    """The scenario, with the first holder's client threaded or asyncio (mode)."""
    with pg:
        with pg.cursor() as cur:
            cur.execute("CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)")
    redis_server.client().delete("doc", "fence:{doc}")
    env = dict(os.environ)
    if os.environ.get("FENCER_INSTALLED") != "1":  # the source tree's package, as conftest's
        env["PYTHONPATH"] = PKG + os.pathsep + os.environ.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, HOLDER, node.addr, name, str(redis_server.port), pg.dsn, mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        first = readline(proc, 20)
        assert first.startswith("token "), first
        token1 = int(first.split()[1])
        proc.send_signal(signal.SIGSTOP)  # a GC pause, a page fault, a VM migration

        # The second client queues for the lock and gets it when the paused
        # holder's lease runs out on the server: no sleep, the grant says so.
        from fencer.fence_postgres import Table
        from fencer.fence_redis import Store

        second = client_factory([node.addr]).lock(name, ttl=10, wait=15).acquire()
        assert second.token > token1
        Table("docs", "id", "token", "body").write(pg, "doc", second.token, "the second holder's write")
        Store(redis_server.client()).set("doc", second.token, "the second holder's write")

        proc.send_signal(signal.SIGCONT)
        proc.stdin.write(b"write\n")
        proc.stdin.flush()
        said = [readline(proc, 20), readline(proc, 20)]
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
    assert said == [f"postgres stale {second.token}", f"redis stale {second.token}"]
    with pg:
        with pg.cursor() as cur:
            cur.execute("SELECT token, body FROM docs WHERE id = 'doc'")
            assert cur.fetchall() == [(second.token, "the second holder's write")]
    assert redis_server.client().get("doc") == b"the second holder's write"
    second.release()
