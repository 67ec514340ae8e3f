"""fencer.fence_redis against a real redis-server (Go: fenceredis's tests)."""

from __future__ import annotations

import random
import re
import threading

import pytest
import redis

from fencecheck import check_history, refusal, want_stale, writers
from fencer.fence_redis import SCRIPT, Store


def test_set_hset_del(redis_db):
    s = Store(redis_db)
    assert s.highest("k") is None
    s.set("k", 5, "five")  # first write
    s.set("k", 5, "five again")  # equal token admitted
    with pytest.raises(Exception) as e:
        s.set("k", 4, "four")  # lower refused
    want_stale(e, "k", 4, 5)
    assert redis_db.get("k") == b"five again"
    s.set("k", 8, "eight", ttl=10)
    assert redis_db.get("k") == b"eight" and 0 < redis_db.pttl("k") <= 10000
    assert s.highest("k") == 8
    # The key layout is fenceredis's: Go and Python writers fence each other.
    assert redis_db.get("fence:{k}") == b"8"

    s.hset("h", 3, {"name": "ada", "role": "admin"})
    s.hset("h", 4, None, "role", "user")
    with pytest.raises(Exception) as e:
        s.hset("h", 3, {"role": "root"})
    want_stale(e, "h", 3, 4)
    assert redis_db.hgetall("h") == {b"name": b"ada", b"role": b"user"}
    with pytest.raises(ValueError):
        s.hset("h", 9, None, "role")

    # A delete keeps the token: the stale writer cannot bring the key back.
    s.delete("k", 9)
    with pytest.raises(Exception) as e:
        s.set("k", 8, "eight, late")
    want_stale(e, "k", 8, 9)
    assert redis_db.exists("k") == 0
    s.set("k", 9, "nine")
    assert redis_db.get("k") == b"nine"


def test_tokens_compare_as_numbers_not_text(redis_db):
    s = Store(redis_db)
    s.set("k", 9, "nine")
    s.set("k", 10, "ten")  # "10" < "9" as text
    with pytest.raises(Exception) as e:
        s.set("k", 9, "late")
    want_stale(e, "k", 9, 10)
    big = (1 << 63) + 12345  # beyond a double's exact range
    s.set("k", big, "big")
    with pytest.raises(Exception) as e:
        s.set("k", big - 1, "late")
    want_stale(e, "k", big - 1, big)


def test_failed_write_changes_nothing(redis_db):
    s = Store(redis_db)
    s.set("k", 2, "a string")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        s.hset("k", 7, {"f": "v"})
    assert s.highest("k") == 2


def test_same_script_as_go():
    """The Lua text is fenceredis's byte for byte (shared script cache, one behaviour)."""
    import os

    go = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fence", "fenceredis", "fenceredis.go")
    src = open(go).read()
    m = re.search(r"redis\.NewScript\(`(.*?)`\)", src, re.S)
    assert m and m.group(1) == SCRIPT


def test_concurrent_interleaved_tokens(redis_server, redis_db):
    holders, writes = 8, 30
    s = Store(redis_server.client())
    lines, started, done = [], threading.Event(), threading.Event()

    def monitor():
        with redis_server.client().monitor() as m:
            started.set()
            for cmd in m.listen():
                lines.append(cmd["command"])
                if "end of test writes" in cmd["command"]:
                    break
        done.set()

    threading.Thread(target=monitor, daemon=True).start()
    assert started.wait(10)  # MONITOR answered: every later command shows up

    def write(token, i):
        value = f"holder {token} write {i}"
        op = random.randrange(3)
        if op == 0:
            return refusal(token, lambda: s.set("doc", token, value))
        if op == 1:
            return refusal(token, lambda: s.delete("doc", token))
        return refusal(token, lambda: s.hset("hash", token, {"by": value}))

    refused = writers(holders, writes, write)
    redis_db.echo("end of test writes")
    assert done.wait(10)
    landed = {"doc": [], "hash": []}
    pat = re.compile(r'^SET fence:\{(doc|hash)\} (\d+)$')
    for line in lines:
        m = pat.match(line)
        if m:
            landed[m.group(1)].append(int(m.group(2)))
    check_history(refused, holders, writes, landed["doc"], landed["hash"])
    assert redis_db.hget("hash", "by").decode().startswith(f"holder {holders} ")
