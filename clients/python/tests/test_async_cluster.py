"""fencer.asyncio on a three-node cluster of real fencerd processes: leader
following, and the leader killed under a renewing lease."""

from __future__ import annotations

import asyncio

import fencer.asyncio as fa
from aio import run
from test_cluster import status_on


def test_follows_the_leader(cluster, name):
    lead = cluster.leader_index()
    follower = (lead + 1) % 3

    async def main():
        # The follower first: the client asks it who leads and moves there.
        async with fa.Client([cluster.addrs[follower], cluster.addrs[lead]]) as c:
            async with c.lock(name, ttl=5) as lk:
                assert lk.token > 0
                assert c._nodes[c._cur].addr == cluster.addrs[lead]
                assert (await c.leader())[1] == cluster.addrs[lead]

    run(main)


def test_failover_lease_survives_or_is_reported_lost(cluster, name):
    """Kill the leader under an auto-renewed lease: whenever a contender gets
    the lock, the holder's lease is no longer valid by its own count, and at
    the end either it was reported lost or the surviving cluster says it
    holds it (as test_cluster's threaded case)."""
    lead = cluster.leader_index()
    others = [i for i in range(3) if i != lead]

    async def main():
        c = fa.Client(cluster.addrs, request_timeout=2.0)
        contender = fa.Client([cluster.addrs[i] for i in others], request_timeout=1.0, failover_timeout=2.0)
        calls = []
        lk = await c.lock(name, ttl=8, on_lost=lambda l, r: calls.append(r)).acquire()
        token = lk.token
        violations = []
        stop = asyncio.Event()

        async def contend():
            while not stop.is_set():
                try:
                    won = await contender.lock(name, ttl=1, wait=0, auto_renew=False).acquire()
                except fa.FencerError:
                    await asyncio.sleep(0.2)
                    continue
                if lk.held:
                    violations.append(f"contender got token {won.token} while the holder's lease was valid")
                await won.release()

        t = asyncio.create_task(contend())
        try:
            cluster.nodes[lead].kill()
            new = await asyncio.to_thread(cluster.leader_index, others)
            assert new != lead
            await asyncio.sleep(2 * 8 / 3 + 0.5)  # two renewal periods under the new leader
        finally:
            stop.set()
            await asyncio.wait_for(t, 10)
        assert not violations, violations
        print(f"asyncio failover: lease {'reported lost: ' + str(lk.lost_reason) if lk.lost.is_set() else 'survived'}")
        if lk.lost.is_set():
            assert len(calls) == 1 and isinstance(calls[0], fa.LeaseLostError)
        else:
            assert not calls
            assert status_on(cluster.nodes[new], name) == (lk.owner, token)
            await lk.extend()  # through the new leader
            assert lk.token == token
            await lk.release()
            assert status_on(cluster.nodes[new], name) is None
        await contender.close()
        await c.close()

    run(main)
