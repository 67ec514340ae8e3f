"""Waiting for a lock in the server's queue (FENCE.ACQUIRE ... WAIT), in
asyncio: fencer/_wait.py's rounds, each a task on a connection of its own.

Giving up (the deadline, an error, a cancellation of the waiting acquire)
cancels every round, which closes its connection at once and so takes it
out of the server's queue, and releases in the background in case a grant
was in flight: none of that awaits, so it happens even as the waiting task
is being cancelled.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from .._conn import classify
from .._grant import MAX_BACKOFF, MIN_BACKOFF, Grant, jitter, millis, now, parse_grant
from .._wait import MIN_ROUND, round_length
from ..errors import ClosedError, LockedError
from ._conn import call, within


class _Round:
    """One FENCE.ACQUIRE ... WAIT on a connection of its own, in a task."""

    def __init__(self, rid: int, node, results: asyncio.Queue):
        self.id = rid
        self.node = node
        self.results = results
        self.conn = node.new_connection()
        self.task: Optional[asyncio.Task] = None
        self.cancelled = False
        self.grant: Optional[Grant] = None
        self.early = False
        self.error: Optional[BaseException] = None

    def cancel(self) -> None:
        """Take the round out of the queue: close its connection now (the
        server drops a waiter whose connection closed) and end its task."""
        self.cancelled = True
        self.node.discard(self.conn)
        if self.task is not None:
            self.task.cancel()

    async def run(self, client, name: str, owner: str, ttl: float, wait: float) -> None:
        began = now()
        try:
            sent = now()
            v = await call(
                self.conn,
                wait + client.request_timeout,
                "FENCE.ACQUIRE",
                name,
                owner,
                millis(ttl),
                "WAIT",
                millis(wait),
            )
            self.grant = parse_grant(v, ttl, sent)
            self.early = self.grant is None and now() - began < wait - wait / 10
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        except Exception as e:  # noqa: BLE001 - reported to the waiter
            self.error = e
        finally:
            self.node.discard(self.conn)
        if not self.cancelled:
            self.results.put_nowait(self)


async def wait_acquire(client, name: str, owner: str, ttl: float, deadline: Optional[float]) -> Optional[Grant]:
    """Queue for name and return the grant, or None if deadline passed
    first: fencer._wait.wait_acquire's rounds and rules."""
    rlen = round_length(ttl)
    results: asyncio.Queue = asyncio.Queue()
    rounds: list = []
    latest = 0

    async def start() -> bool:
        nonlocal latest
        wait = rlen
        if deadline is not None:
            wait = min(wait, deadline - now())
        if wait < 0.001:
            return False
        latest += 1
        r = _Round(latest, await client._pick(), results)
        rounds.append(r)
        r.task = client._background(r.run(client, name, owner, ttl, wait), f"fencer-wait-{name}")
        return True

    given_up = False

    def give_up(err: Optional[BaseException]):
        nonlocal given_up
        given_up = True
        try:
            for r in rounds:
                r.cancel()
        finally:
            client._release_later(name, owner)
        if err is not None:
            raise err
        return None

    client._waits.add(results)
    try:
        await start()
        next_at = now() + rlen / 2
        failed_since: Optional[float] = None
        last: Optional[BaseException] = None
        uncertain: Optional[BaseException] = None
        failures = refusals = 0
        while True:
            if client.closed:
                return give_up(ClosedError("client closed"))
            t = next_at - now()
            if deadline is not None:
                t = min(t, deadline - now())
            try:
                r = await within(results.get(), max(t, 0))
            except asyncio.TimeoutError:
                if deadline is not None and now() >= deadline:
                    return give_up(None if last is None else client._unavailable(["FENCE.ACQUIRE"], last, uncertain))
                if now() >= next_at:
                    refusals = 0
                    await start()
                    next_at = now() + rlen / 2
                continue
            if r is None:  # the client was closed
                continue
            if r.error is None and r.grant is not None:
                # Won: the other rounds leave the queue (the server answered
                # them null already, or will on their connections' close).
                for o in rounds:
                    if o is not r:
                        o.cancel()
                return r.grant
            if r.id != latest:
                continue
            if r.error is None and r.early:
                refusals += 1
                if refusals >= 2:
                    return give_up(LockedError(f"lock {name!r}: the server refuses this owner"))
                await start()
                next_at = now() + rlen / 2
                continue
            if r.error is None:
                failed_since, failures, last, uncertain = None, 0, None, None
                if not await start():
                    return give_up(None)
                next_at = now() + rlen / 2
                continue
            f = classify(r.error, r.node.addr)
            if f.argument == "wait" and rlen > MIN_ROUND:
                rlen = max(rlen / 2, MIN_ROUND)
                await start()
                next_at = now() + rlen / 2
                continue
            if not f.transient:
                return give_up(f.error)
            last = f.error
            if f.uncertain:
                uncertain = f.error
            client._failed(r.node, f.leader)
            if failed_since is None:
                failed_since = now()
            elif now() - failed_since >= client.failover_timeout:
                return give_up(client._unavailable(["FENCE.ACQUIRE"], last, uncertain))
            failures += 1
            n = len(client._nodes)
            if failures % n == 0:
                next_at = now() + jitter(min(MIN_BACKOFF * (2 ** min(failures // n, 8)), MAX_BACKOFF))
                continue
            await start()
            next_at = now() + rlen / 2
    except BaseException:
        # A cancellation of the waiting acquire (or anything else that stops
        # it): leave the queue all the same.
        if not given_up:
            give_up(None)
        raise
    finally:
        client._waits.discard(results)
