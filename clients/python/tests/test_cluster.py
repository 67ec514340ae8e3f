"""A three-node cluster of real fencerd processes: leader following,
failover, and every node paused."""

from __future__ import annotations

import signal
import threading
import time

import pytest

import fencer
from conftest import wait_for


def status_on(node, name):
    v = node.raw(socket_timeout=2).execute_command("FENCE.STATUS", name)
    return None if v is None else (v[0].decode(), v[1])


def test_follows_the_leader(cluster, client_factory, name):
    lead = cluster.leader_index()
    follower = (lead + 1) % 3
    # The follower first: the client asks it who leads and moves there.
    c = client_factory([cluster.addrs[follower], cluster.addrs[lead]])
    with c.lock(name, ttl=5) as lk:
        assert lk.token > 0
        assert c._nodes[c._cur].addr == cluster.addrs[lead]
        assert c.leader()[1] == cluster.addrs[lead]


def test_failover_lease_survives_or_is_reported_lost(cluster, client_factory, name):
    """Kill the leader under an auto-renewed lease. Whatever happens, the
    holder is never silently displaced: whenever a contender gets the lock,
    the holder's lease is no longer valid by its own count, and at the end
    either it was reported lost or the surviving cluster says it holds it."""
    c = client_factory(cluster.addrs, request_timeout=2.0)
    calls = []
    lk = c.lock(name, ttl=8, on_lost=lambda l, r: calls.append(r)).acquire()
    token = lk.token
    lead = cluster.leader_index()
    others = [i for i in range(3) if i != lead]
    contender = client_factory([cluster.addrs[i] for i in others], request_timeout=1.0, failover_timeout=2.0)
    violations, stop = [], threading.Event()

    def contend():
        while not stop.is_set():
            try:
                won = contender.lock(name, ttl=1, wait=0, auto_renew=False).acquire()
            except fencer.FencerError:
                stop.wait(0.2)
                continue
            if lk.held:
                violations.append(f"contender got token {won.token} while the holder's lease was valid")
            won.release()

    t = threading.Thread(target=contend)
    t.start()
    try:
        cluster.nodes[lead].kill()
        new = cluster.leader_index(among=others)
        assert new != lead
        # Two renewal periods under the new leader.
        time.sleep(2 * 8 / 3 + 0.5)
    finally:
        stop.set()
        t.join(10)
    assert not violations, violations
    print(f"failover: lease {'reported lost: ' + str(lk.lost_reason) if lk.lost.is_set() else 'survived'}")
    if lk.lost.is_set():
        assert len(calls) == 1 and isinstance(calls[0], fencer.LeaseLostError)
    else:
        assert not calls
        assert status_on(cluster.nodes[new], name) == (lk.owner, token)
        lk.extend()  # through the new leader
        assert lk.token == token
        lk.release()
        assert status_on(cluster.nodes[new], name) is None

    # Then the cluster loses its quorum: the last node has no leader and
    # says so (NOLEADER); the client tries it until its failover timeout.
    cluster.nodes[others[0]].kill()
    last = cluster.nodes[others[1]]
    wait_for(lambda: last.raw(socket_timeout=2).execute_command("FENCE.LEADER") is None, 30, "the last node sees no leader")
    alone = client_factory([last.addr], failover_timeout=3.0)
    t0 = time.monotonic()
    with pytest.raises(fencer.NoLeaderError) as e:
        alone.lock(name, ttl=5, wait=0).acquire()
    assert time.monotonic() - t0 < 3.0 + 2.0 + 1.0  # the failover timeout, one server timeout, a margin
    assert e.value.last is not None and e.value.last.code == "NOLEADER"


def test_every_node_paused_past_the_ttl(cluster, client_factory, name):
    c = client_factory(cluster.addrs)
    calls = []
    ttl = 1.5
    lk = c.lock(name, ttl=ttl, on_lost=lambda l, r: calls.append(r)).acquire()
    for n in cluster.nodes:
        n.signal(signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        assert lk.lost.wait(ttl + 1.0), "paused cluster: the lease was not reported lost after its TTL"
        assert time.monotonic() - t0 <= ttl + 1.0
        assert len(calls) == 1 and isinstance(calls[0], fencer.LeaseLostError)
        assert "validity" in str(calls[0])
        assert not lk.held
        # A request that reaches a node and gets no answer has an unknown
        # outcome: that is UncertainError, never a "no".
        quick = client_factory(cluster.addrs, request_timeout=0.3, failover_timeout=1.0)
        with pytest.raises(fencer.UncertainError):
            quick.lock(name + "/other", ttl=5, wait=0).acquire()
    finally:
        for n in cluster.nodes:
            n.signal(signal.SIGCONT)
    # Once the cluster is back, the lock goes to the next owner (the old
    # lease runs out on the server) with a larger token.
    after = client_factory(cluster.addrs)
    with after.lock(name, ttl=5, wait=30) as nxt:
        assert nxt.token > lk.token
    assert len(calls) == 1
