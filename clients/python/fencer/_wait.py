"""Waiting for a lock in the server's queue (FENCE.ACQUIRE ... WAIT).

A port of the Go client's wait.go: waits are issued in overlapping rounds
of half the TTL, each on a connection of its own, so that a waiting acquire
never holds up other requests (renewals above all) on the client's shared
connections, a grant never arrives with its validity spent, and giving up
(closing the round's connection) takes the waiter out of the queue at once.
"""

from __future__ import annotations

import queue
import socket
import threading
from typing import Optional

from ._conn import classify, receive, send
from ._grant import MAX_BACKOFF, MIN_BACKOFF, Grant, jitter, millis, now, parse_grant
from .errors import ClosedError, LockedError

# Caps one wait whatever the TTL, so that a long TTL does not pin a request
# to one node for long (and stays below the server's --max-wait).
MAX_ROUND = 30.0
# The shortest wait the client falls back to when the server refuses longer ones.
MIN_ROUND = 0.1

# Test hook: called by a round's thread after it connected, before it sends
# (tests/test_wait_give_up.py delays it there to cancel the round meanwhile).
_before_send = None


def round_length(ttl: float) -> float:
    """Half the TTL: a grant arriving at the very end of a wait still has
    half its validity, counted from before the request was sent."""
    return max(min(ttl / 2, MAX_ROUND), 0.001)


class _Round:
    """One FENCE.ACQUIRE ... WAIT on a connection of its own.

    The round's thread alone uses the connection (redis-py's Connection is
    not thread-safe, and disconnects itself on errors). cancel() only shuts
    the socket down, which ends the wait on both sides; the thread then
    closes it. _mu orders cancel() against the send: a round cancelled
    before it sent never sends, and one that sent is shut down.
    """

    def __init__(self, rid: int, node, results: "queue.Queue"):
        self.id = rid
        self.node = node
        self.results = results
        self.conn = node.new_connection()
        self._mu = threading.Lock()  # guards cancelled, done and the socket's shutdown
        self.cancelled = False
        self._done = False  # the thread closed the connection: nothing to shut down
        # Set by run: the outcome.
        self.grant: Optional[Grant] = None
        self.early = False
        self.error: Optional[BaseException] = None

    def cancel(self) -> None:
        """Take the round out of the queue (or keep it from joining it) by
        shutting its connection down."""
        with self._mu:
            self.cancelled = True
            if self._done:
                return
            sock = self.conn._sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # not connected (any more)

    def run(self, client, name: str, owner: str, ttl: float, wait: float) -> None:
        began = now()
        try:
            self.conn.connect()
            if _before_send is not None:
                _before_send()
            with self._mu:
                if self.cancelled:
                    return
                sent = now()
                send(self.conn, "FENCE.ACQUIRE", name, owner, millis(ttl), "WAIT", millis(wait))
            v = receive(self.conn, wait + client.request_timeout)
            self.grant = parse_grant(v, ttl, sent)
            self.early = self.grant is None and now() - began < wait - wait / 10
        except BaseException as e:  # noqa: BLE001 - reported to the waiter
            self.error = e
        finally:
            with self._mu:
                self._done = True
                self.conn.disconnect()
        if not self.cancelled:
            self.results.put(self)


def wait_acquire(client, name: str, owner: str, ttl: float, deadline: Optional[float]) -> Optional[Grant]:
    """Queue for name and return the grant, or None if deadline passed first.

    A new round starts halfway through the current one, and the server
    puts it in the older one's place in the line (one waiter per key and
    owner), answering the older one null: so the place in the queue is kept
    while no single wait lasts longer than half the TTL. There is no
    polling: a round ends early only if it is granted or replaced.
    """
    rlen = round_length(ttl)
    results: "queue.Queue" = queue.Queue()
    rounds: list[_Round] = []
    latest = 0

    def start() -> bool:
        nonlocal latest
        wait = rlen
        if deadline is not None:
            wait = min(wait, deadline - now())
        if wait < 0.001:
            return False
        latest += 1
        r = _Round(latest, client._pick(), results)
        rounds.append(r)
        threading.Thread(
            target=r.run, args=(client, name, owner, ttl, wait), name=f"fencer-wait-{name}", daemon=True
        ).start()
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

    with client._bg_mu:
        client._waits.add(results)
    try:
        start()
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
                r = results.get(timeout=max(t, 0))
            except queue.Empty:
                if deadline is not None and now() >= deadline:
                    # None (the wait ended, not granted) unless the last
                    # round failed: then its failure.
                    return give_up(None if last is None else client._unavailable(["FENCE.ACQUIRE"], last, uncertain))
                if now() >= next_at:
                    refusals = 0  # the latest round was not refused at once
                    start()
                    next_at = now() + rlen / 2
                continue
            if r is None:  # the client was closed
                continue
            if r.error is None and r.grant is not None:
                return r.grant
            if r.id != latest:
                continue  # replaced by a newer round, or failed after it started
            if r.error is None and r.early:
                # Answered null at once, not after waiting. Twice in a row,
                # that is a refusal: the server remembers this owner's
                # release of the lock. Once can also be an older wait of
                # ours taking this one's place, if a node re-sent it after
                # a leader change: then the next wait takes its place again.
                refusals += 1
                if refusals >= 2:
                    return give_up(LockedError(f"lock {name!r}: the server refuses this owner"))
                start()
                next_at = now() + rlen / 2
                continue
            if r.error is None:
                # The wait ran out before a newer one took its place (a slow
                # link, or the place was lost in a leader change): queue again.
                failed_since, failures, last, uncertain = None, 0, None, None
                if not start():
                    return give_up(None)
                next_at = now() + rlen / 2
                continue
            f = classify(r.error, r.node.addr)
            if f.argument == "wait" and rlen > MIN_ROUND:
                # The server allows shorter waits (fencerd --max-wait).
                rlen = max(rlen / 2, MIN_ROUND)
                start()
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
                # Every node failed once more: pause before the next round.
                next_at = now() + jitter(min(MIN_BACKOFF * (2 ** min(failures // n, 8)), MAX_BACKOFF))
                continue
            start()
            next_at = now() + rlen / 2
    except BaseException:
        # Anything else that stops the wait (KeyboardInterrupt, an exception
        # from a signal handler, a bug): leave the queue all the same.
        if not given_up:
            give_up(None)
        raise
    finally:
        with client._bg_mu:
            client._waits.discard(results)
