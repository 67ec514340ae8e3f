"""Locks on one real fencerd: tokens, release, renewal, loss, waits."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest

import fencer
from conftest import wait_for


def status(node, name):
    v = node.raw().execute_command("FENCE.STATUS", name)
    return None if v is None else (v[0].decode(), v[1], v[2])


def test_context_manager(node, client_factory, name):
    c = client_factory([node.addr])
    with c.lock(name, ttl=5) as lease:
        assert isinstance(lease.token, int) and lease.token > 0
        assert lease.held and not lease.lost.is_set()
        assert 4.0 < lease.remaining() <= 5.0
        assert status(node, name)[:2] == (lease.owner, lease.token)
        assert c.token(name) == lease.token
        assert c.check(name, lease.token)
    assert status(node, name) is None
    assert not lease.held and lease.remaining() == 0
    assert not lease.lost.is_set()
    with pytest.raises(fencer.ReleasedError):
        lease.extend()


def test_tokens_increase_and_owners_differ(node, client_factory, name):
    c = client_factory([node.addr])
    lk = c.lock(name, ttl=5, wait=0)
    lk.acquire()
    first, owner1 = lk.token, lk.owner
    lk.release()
    lk.acquire()  # a Lock can be taken again: fresh owner, new token
    assert lk.token > first and lk.owner != owner1
    lk.release()


def test_locked_without_wait(node, client_factory, name):
    a, b = client_factory([node.addr]), client_factory([node.addr])
    with a.lock(name, ttl=5) as held:
        t0 = time.monotonic()
        with pytest.raises(fencer.LockedError):
            b.lock(name, ttl=5, wait=0).acquire()
        assert time.monotonic() - t0 < 2.0
        assert status(node, name)[0] == held.owner


def test_release_idempotent(node, client_factory, name):
    c = client_factory([node.addr])
    lk = c.lock(name, ttl=5).acquire()
    owner = lk.owner
    lk.release()
    lk.release()
    assert status(node, name) is None
    # The server remembers the release: repeated, it still answers 1, and
    # the same owner may not take the lock back.
    r = node.raw()
    assert r.execute_command("FENCE.RELEASE", name, owner) == 1
    assert r.execute_command("FENCE.ACQUIRE", name, owner, 5000) is None
    # A Lock never acquired releases as a no-op.
    c.lock(name + "/never").release()


def test_auto_renew_keeps_the_lease(node, client_factory, name):
    c = client_factory([node.addr])
    lost = []
    lk = c.lock(name, ttl=0.6, on_lost=lambda l, r: lost.append(r)).acquire()
    time.sleep(2.0)  # more than three TTLs
    assert not lk.lost.is_set() and not lost
    assert lk.remaining() > 0
    assert status(node, name)[:2] == (lk.owner, lk.token)
    lk.release()


def test_without_renewal_validity_runs_out(node, client_factory, name):
    c = client_factory([node.addr])
    got = []
    done = threading.Event()

    def on_lost(lock, reason):
        got.append((time.monotonic(), reason))
        done.set()

    t0 = time.monotonic()
    lk = c.lock(name, ttl=0.8, auto_renew=False, on_lost=on_lost).acquire()
    assert lk.valid_until <= t0 + 0.8
    assert done.wait(0.8 + 1.0), "validity ran out without the lease being reported lost"
    at, reason = got[0]
    assert at - t0 >= 0.8 * 0.9
    assert isinstance(reason, fencer.LeaseLostError) and "validity" in str(reason)
    assert lk.lost.is_set() and lk.lost_reason is reason and not lk.held
    time.sleep(0.2)
    assert len(got) == 1
    with pytest.raises(fencer.LeaseLostError):
        lk.extend()


def test_extend(node, client_factory, name):
    c = client_factory([node.addr])
    lk = c.lock(name, ttl=1.0, auto_renew=False).acquire()
    before = lk.valid_until
    time.sleep(0.4)
    lk.extend()
    assert lk.valid_until >= before + 0.3
    assert status(node, name)[2] > 800  # the server counts the TTL from the extend
    lk.release()


def test_lost_on_revoke(node, client_factory, name):
    c = client_factory([node.addr])
    calls = []
    lk = c.lock(name, ttl=1.0, on_lost=lambda l, r: calls.append(r)).acquire()
    assert node.raw().execute_command("FENCE.REVOKE", name) == 1
    assert lk.lost.wait(2.0), "revoked lease not reported lost within two renewals"
    assert len(calls) == 1 and isinstance(calls[0], fencer.LeaseLostError)
    assert "no longer holds" in str(calls[0])
    assert lk.lost_reason is calls[0]
    with pytest.raises(fencer.LeaseLostError):
        lk.release()  # the server says this owner did not hold it
    lk.release()  # and once is enough
    time.sleep(0.5)
    assert len(calls) == 1


def test_close_reports_held_locks_lost(node, fencerd_bin, name):
    c = fencer.Client([node.addr])
    calls = []
    lk = c.lock(name, ttl=5, on_lost=lambda l, r: calls.append(r)).acquire()
    c.close()
    assert lk.lost.is_set() and isinstance(calls[0], fencer.ClosedError)
    with pytest.raises(fencer.ClosedError):
        c.lock(name + "/2").acquire()


def waiters(node) -> int:
    """fencer_waiters from the node's /metrics: acquires queued on it."""
    body = urllib.request.urlopen(f"http://{node.http}/metrics", timeout=5).read().decode()
    total = 0
    for line in body.splitlines():
        if line.startswith("fencer_waiters"):
            total += int(float(line.split()[-1]))
    return total


def test_fifo_waits(node, client_factory, name):
    holder = client_factory([node.addr])
    held = holder.lock(name, ttl=10).acquire()
    order, tokens, errors = [], {}, []
    mu = threading.Lock()
    release_next = {i: threading.Event() for i in range(3)}

    def waiter(i):
        try:
            c = client_factory([node.addr])
            with c.lock(name, ttl=10, wait=30) as lk:
                with mu:
                    order.append(i)
                    tokens[i] = lk.token
                release_next[i].wait(20)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    base = waiters(node)
    threads = []
    for i in range(3):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        # The next waiter starts once this one is queued on the server.
        wait_for(lambda: waiters(node) >= base + i + 1, 10, f"waiter {i} queued")
    held.release()
    for i in range(3):
        wait_for(lambda: len(order) > i, 10, f"waiter {i} granted")
        release_next[i].set()
    for t in threads:
        t.join(20)
    assert not errors
    assert order == [0, 1, 2]
    assert tokens[0] > held.token and tokens[0] < tokens[1] < tokens[2]


def test_wait_ends(node, client_factory, name):
    a, b = client_factory([node.addr]), client_factory([node.addr])
    held = a.lock(name, ttl=10).acquire()
    t0 = time.monotonic()
    with pytest.raises(fencer.LockedError):
        b.lock(name, ttl=5, wait=0.5).acquire()
    took = time.monotonic() - t0
    assert 0.45 <= took < 1.5
    # The waiter left the queue: the release frees the lock, nobody gets it.
    wait_for(lambda: waiters(node) == 0, 5, "the waiter left the queue")
    held.release()
    assert status(node, name) is None


def test_waiting_does_not_hold_up_renewals(node, client_factory, name):
    """A waiting acquire has a connection of its own: the same client's
    other lease keeps being renewed, with a TTL far shorter than the wait."""
    c = client_factory([node.addr])
    other = client_factory([node.addr])
    renewed = c.lock(name + "/renewed", ttl=0.5).acquire()
    blocker = other.lock(name, ttl=10).acquire()
    result = {}

    def wait():
        try:
            result["lock"] = c.lock(name, ttl=5, wait=10).acquire()
        except Exception as e:  # noqa: BLE001
            result["error"] = e

    t = threading.Thread(target=wait)
    t.start()
    wait_for(lambda: waiters(node) >= 1, 10, "the acquire is queued")
    time.sleep(2.0)  # four TTLs of the renewed lease, while the acquire waits
    assert not renewed.lost.is_set(), renewed.lost_reason
    assert status(node, name + "/renewed")[:2] == (renewed.owner, renewed.token)
    assert t.is_alive(), "the acquire stopped waiting"
    blocker.release()
    t.join(10)
    assert "error" not in result, result.get("error")
    assert result["lock"].token > blocker.token
    result["lock"].release()
    renewed.release()


def test_from_asyncio_through_threads(node, client_factory, name):
    """What docs/clients-python.md tells asyncio users to do."""
    import asyncio

    c = client_factory([node.addr])

    async def main():
        lease = await asyncio.to_thread(c.lock(name, ttl=5).acquire)
        try:
            await asyncio.sleep(0)
            return lease.token, status(node, name)
        finally:
            await asyncio.to_thread(lease.release)

    token, st = asyncio.run(main())
    assert st[1] == token
    assert status(node, name) is None
