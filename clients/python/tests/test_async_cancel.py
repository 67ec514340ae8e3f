"""Cancellation of a waiting fencer.asyncio acquire at every await point.

For k = 1, 2, ... the acquire is cancelled at its k-th scheduling step (the
k-th suspension of its task or of a task it started: Steps), until an
acquire completes before its k-th step. The lock is held by another owner, who releases it shortly after the
acquire started, so the steps cover the first request, queueing, the wait,
the grant and what follows it. After each cancellation: the task raised
CancelledError; within one round trip (asserted with a 1 s margin) the lock
is free (never left held by nobody until the waiter's TTL) and nobody waits
in the server's queue; no task and no connection of the waiter's is left
behind but its one idle connection, which still answers in step.
"""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

import fencer.asyncio as fa
from aio import clients_drop_to, run, settle, status

# The waiter's rounds last WAITER_TTL/2 and the next starts halfway through
# one, so with the holder's release at HOLDER_RELEASES_AFTER the acquire
# sends two rounds. WAITER_TTL is four times the checks' bound: a lock left
# held by nobody would show.
WAITER_TTL = 4.0
HOLDER_RELEASES_AFTER = 1.3
MAX_STEPS = 500  # a bound on the loop, far above what an acquire takes


class Steps:
    """Counts the scheduling steps of an acquire: the suspensions of its own
    task and of every task started while it runs (its wait rounds, its
    releases), and at the k-th step of any of them cancels the acquire's
    task. So the CancelledError lands at each await point of the acquire,
    while each of its rounds is at each of its own (connecting, sent,
    answered)."""

    def __init__(self, k: int):
        self.k = k
        self.steps = 0
        self.target = None  # the acquire's task
        self.at_done = None  # the steps taken when the acquire returned

    def count(self, coro):
        """Await coro, counting its suspensions."""
        it = coro.__await__()
        send, throw = None, None
        while True:
            try:
                y = it.throw(throw) if throw is not None else it.send(send)
            except StopIteration as e:
                if asyncio.current_task() is self.target:
                    self.at_done = self.steps
                return e.value
            self.steps += 1
            if self.steps == self.k and self.target is not None:
                self.target.cancel()
            try:
                send, throw = (yield y), None
            except BaseException as e:  # noqa: BLE001 - passed on to coro
                send, throw = None, e

    def task_factory(self, loop, coro, **kw):
        """A task factory that counts the steps of every new task."""

        class Counted:
            def __await__(inner):
                return self.count(coro)

        async def counted():
            return await Counted()

        return asyncio.Task(counted(), loop=loop, **kw)


def waiters(node) -> int:
    with urllib.request.urlopen(f"http://{node.http}/metrics", timeout=5) as resp:
        body = resp.read().decode()
    return sum(int(float(line.split()[-1])) for line in body.splitlines() if line.startswith("fencer_waiters"))


async def wait_until(cond, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"{what}: not within {timeout}s"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("held", [True, False], ids=["waiting", "free"])
def test_cancel_an_acquire_at_every_step(node_factory, name, capsys, held):
    """held: the lock is held by another owner, who releases it after
    HOLDER_RELEASES_AFTER (a waiting acquire, granted by its second round);
    else it is free (the first request's reply is a grant)."""

    node = node_factory()  # of its own: the test counts its connections

    async def main():
        holder = fa.Client([node.addr])
        waiter = None
        completed_at = None
        try:
            for k in range(1, MAX_STEPS + 1):
                key = f"{name}/{k}"
                first = await holder.lock(key, ttl=10).acquire()

                async def release_soon():
                    if held:
                        await asyncio.sleep(HOLDER_RELEASES_AFTER)
                    await first.release()

                releaser = asyncio.create_task(release_soon())
                if not held:
                    await releaser
                waiter = fa.Client([node.addr])  # its connection is made by the acquire
                lk = waiter.lock(key, ttl=WAITER_TTL)
                stepped = Steps(k)
                loop = asyncio.get_running_loop()
                loop.set_task_factory(stepped.task_factory)
                try:
                    task = asyncio.create_task(lk.acquire())
                    stepped.target = task
                    try:
                        await task
                        cancelled = False
                    except asyncio.CancelledError:
                        cancelled = True
                finally:
                    loop.set_task_factory(None)
                await releaser
                if not cancelled:
                    # Completed before its k-th step: it holds the lock.
                    assert stepped.at_done < k, (stepped.at_done, k)
                    assert lk.held and status(node, key) == (lk.owner, lk.token)
                    await lk.release()
                    completed_at = stepped.at_done
                    await waiter.close()
                    break
                assert not lk.held
                # Within one round trip: freed (released by the waiter if it
                # was granted), out of the queue, its tasks and round
                # connections gone.
                await settle(waiter, 1.0)
                await wait_until(lambda: status(node, key) is None, 1.0, f"k={k}: the lock is free")
                await wait_until(lambda: waiters(node) == 0, 1.0, f"k={k}: no waiter queued")
                assert waiter.open_connections() <= 1, f"k={k}: {waiter.open_connections()} connections open"
                # The node counts this check's connection and the clients' own.
                await clients_drop_to(node, 1 + holder.open_connections() + waiter.open_connections())
                # The idle connection is in step: a request reads its own reply.
                assert await waiter.status(key) is None
                assert await waiter.token(key) is None
                # And the lock is free for the next owner at once.
                async with waiter.lock(key, ttl=5, wait=0) as nxt:
                    assert nxt.token > first.token
                await waiter.close()
        finally:
            if waiter is not None:
                await waiter.close()
            await holder.close()
        assert completed_at is not None, f"the acquire did not complete within {MAX_STEPS} steps"
        if held:
            assert completed_at >= 8, f"only {completed_at} steps: the wait was not exercised"
        with capsys.disabled():
            what = "a waiting acquire" if held else "an acquire of a free lock"
            print(f"\nfencer.asyncio: {what} cancelled at each of its {completed_at} steps")

    run(main)
