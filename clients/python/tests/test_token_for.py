"""token_for with redis-py's own Lock, taking a lock on fencer."""

from __future__ import annotations

import pytest
import redis.lock

import fencer


def test_redis_py_lock_then_token(node, name):
    r = node.raw()
    first = redis.lock.Lock(r, name, timeout=5)
    assert first.acquire(blocking=False)
    t1 = fencer.token_for(r, name, first.local.token)
    assert isinstance(t1, int) and t1 > 0
    assert r.execute_command("FENCE.CHECK", name, t1) == 1
    # Another redis-py Lock on the same name waits, as with Redis.
    other = redis.lock.Lock(r, name, timeout=5)
    assert not other.acquire(blocking=False)
    with pytest.raises(fencer.LeaseLostError):
        fencer.token_for(r, name, b"not-the-holder")
    assert first.extend(5)  # redis-py's Lua extend script runs on fencer
    assert fencer.token_for(r, name, first.local.token) == t1  # extending keeps the token
    value = first.local.token
    first.release()
    with pytest.raises(fencer.LeaseLostError):
        fencer.token_for(r, name, value)  # released: the value holds nothing
    assert other.acquire(blocking=False)
    t2 = fencer.token_for(r, other.name, other.local.token)
    assert t2 > t1
    other.release()


def test_error_by_code(node_factory, name):
    n = node_factory("--requirepass", "pw", auth={"password": "pw"})
    with pytest.raises(fencer.AuthError) as e:
        fencer.token_for(n.raw(), name, "v")
    assert e.value.code == "NOAUTH"
