"""fencer.asyncio against a real one-node fencerd: the threaded client's
guarantees, with coroutines (needs redis-py 5.0.1 or later)."""

from __future__ import annotations

import asyncio
import time

import pytest

import fencer.asyncio as fa
from aio import clients_drop_to, connected_clients, run, settle, status


def test_acquire_release_and_tokens(node, name):
    async def main():
        async with fa.Client([node.addr]) as c:
            async with c.lock(name, ttl=5) as a:
                assert a.held and a.token > 0 and 4.0 < a.remaining() <= 5.0
                assert status(node, name) == (a.owner, a.token)
                assert await c.check(name, a.token)
            assert not a.held and status(node, name) is None
            b = await c.lock(name, ttl=5).acquire()
            assert b.token > a.token
            await b.release()
            await b.release()  # a second release does nothing

    run(main)


def test_locked_without_wait_and_fifo_waits(node, name):
    async def main():
        async with fa.Client([node.addr]) as c:
            held = await c.lock(name, ttl=10).acquire()
            with pytest.raises(fa.LockedError):
                await c.lock(name, ttl=5, wait=0).acquire()
            order = []

            async def waiter(i):
                lk = await c.lock(name, ttl=5).acquire()  # no bound on the wait
                order.append((i, lk.token))
                await lk.release()

            tasks = []
            for i in range(3):
                tasks.append(asyncio.create_task(waiter(i)))
                await asyncio.sleep(0.2)  # queue in this order
            await held.release()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
            assert [i for i, _ in order] == [0, 1, 2]
            assert [t for _, t in order] == sorted(t for _, t in order)
            assert all(t > held.token for _, t in order)

    run(main)


def test_wait_ends_with_locked(node, name):
    async def main():
        async with fa.Client([node.addr]) as c:
            held = await c.lock(name, ttl=10).acquire()
            t0 = time.monotonic()
            with pytest.raises(fa.LockedError):
                await c.lock(name, ttl=5).acquire(wait=0.5)
            assert 0.4 <= time.monotonic() - t0 < 1.5
            await settle(c)
            assert status(node, name) == (held.owner, held.token)
            await held.release()

    run(main)


def test_renewal_keeps_the_lease_and_revoke_is_reported(node, name):
    async def main():
        async with fa.Client([node.addr]) as c:
            calls = []
            lk = await c.lock(name, ttl=0.6, on_lost=lambda l, r: calls.append(r)).acquire()
            token = lk.token
            await asyncio.sleep(1.8)  # three TTLs: renewed in the background
            assert lk.held and lk.token == token and not calls
            assert status(node, name) == (lk.owner, token)
            assert await c.revoke(name)
            await asyncio.wait_for(lk.lost.wait(), 0.6 + 1.0)
            assert len(calls) == 1 and isinstance(calls[0], fa.LeaseLostError)
            assert lk.lost_reason is calls[0] and not lk.held
            with pytest.raises(fa.LeaseLostError):
                await lk.extend()
            with pytest.raises(fa.LeaseLostError):
                await lk.release()

    run(main)


def test_validity_runs_out_without_renewal(node, name):
    async def main():
        async with fa.Client([node.addr]) as c:
            lk = await c.lock(name, ttl=0.5, auto_renew=False).acquire()
            t0 = time.monotonic()
            await asyncio.wait_for(lk.lost.wait(), 0.5 + 1.0)
            assert time.monotonic() - t0 <= 0.5
            assert "validity" in str(lk.lost_reason)

    run(main)


def test_close_reports_held_locks_lost_and_leaves_nothing(node, name):
    async def main():
        before = connected_clients(node)
        c = fa.Client([node.addr])
        lk = await c.lock(name, ttl=5).acquire()
        waiting = asyncio.create_task(c.lock(name, ttl=5).acquire())
        await asyncio.sleep(0.2)
        assert c.open_connections() == 2  # the shared one and the wait round's
        await c.close()
        assert lk.lost.is_set() and isinstance(lk.lost_reason, fa.ClosedError)
        with pytest.raises(fa.ClosedError):
            await waiting
        assert c.open_connections() == 0
        await clients_drop_to(node, before)
        with pytest.raises(fa.ClosedError):
            await c.lock(name).acquire()

    run(main)


def test_uncertain_is_not_no(node_factory, name):
    """A node that takes the request and never answers: UncertainError, and
    the acquire's release goes out in the background."""
    import signal

    n = node_factory()

    async def main():
        async with fa.Client([n.addr], request_timeout=0.3, failover_timeout=1.0) as c:
            await c.status(name)  # connected before the pause
            n.signal(signal.SIGSTOP)
            try:
                with pytest.raises(fa.UncertainError):
                    await c.lock(name, ttl=5, wait=0).acquire()
            finally:
                n.signal(signal.SIGCONT)
            await settle(c, 5.0)
            assert status(n, name) is None

    run(main)
