"""The asyncio client: addresses, retries, leader following.

fencer/client.py (the threaded client) is the reference; this is the same
logic with coroutines, and tasks in place of threads. Every task it starts
(a release in the background, a wait round, a lease's renewal and timer) is
tracked and ends by itself within a round trip or when close() ends it.
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from typing import Callable, Iterable, Optional, Sequence, Union

from .._conn import classify, is_refusal
from .._grant import (
    DEFAULT_DRIFT,
    DEFAULT_FAILOVER_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TTL,
    DRIFT_FLOOR,
    LEADER_PROBE_TIMEOUT,
    MAX_BACKOFF,
    MIN_BACKOFF,
    RELEASE_AGAIN,
    Grant,
    jitter,
    millis,
    now,
    parse_grant,
    text,
)
from ..errors import (
    AuthError,
    ClosedError,
    FencerError,
    InvalidArgumentError,
    LeaseLostError,
    LockedError,
    NoLeaderError,
    NoPermError,
    TLSError,
    UncertainError,
)
from ._conn import Node, within
from ._wait import wait_acquire
from .lock import Lock

SSLArg = Union[None, bool, _ssl.SSLContext]

# Failures of an acquire's first request after which there is nothing to
# release: refused before it took effect, or nothing could be sent.
_REFUSED = (InvalidArgumentError, ClosedError, AuthError, NoPermError, TLSError)


class Client:
    """An asyncio client of a fencer cluster, through any subset of its
    nodes' addresses: fencer.Client's arguments and behaviour, with
    coroutines. Use it from one event loop; ``await close()`` it (or use
    ``async with``) when done."""

    def __init__(
        self,
        addresses: Union[str, Iterable[str]],
        username: Optional[str] = None,
        password: Optional[str] = None,
        ssl: SSLArg = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        drift: float = DEFAULT_DRIFT,
    ):
        if isinstance(addresses, str):
            addresses = [a.strip() for a in addresses.split(",") if a.strip()]
        addrs: list = []
        for a in addresses:
            if a not in addrs:
                addrs.append(a)
        if not addrs:
            raise InvalidArgumentError("no addresses")
        if request_timeout <= 0:
            raise InvalidArgumentError(f"request timeout {request_timeout} is not positive")
        if failover_timeout <= 0:
            raise InvalidArgumentError(f"failover timeout {failover_timeout} is not positive")
        if not 0 <= drift < 0.5:
            raise InvalidArgumentError(f"drift factor {drift} is outside [0, 0.5)")
        if username and not password:
            raise InvalidArgumentError(f"user {username!r} has an empty password")
        if ssl is True:
            ctx = _ssl.create_default_context()
        elif ssl is None or ssl is False:
            ctx = None
        elif isinstance(ssl, _ssl.SSLContext):
            ctx = ssl
        else:
            raise TypeError("ssl must be None, True or an ssl.SSLContext")
        self.request_timeout = float(request_timeout)
        self.failover_timeout = float(failover_timeout)
        self.drift = float(drift)
        self._nodes: list = []
        for a in addrs:
            try:
                self._nodes.append(
                    Node(a, username=username, password=password, ssl_context=ctx, request_timeout=self.request_timeout)
                )
            except ValueError as e:
                raise InvalidArgumentError(str(e)) from None
        self._closed = False
        self._closing: Optional[asyncio.Event] = None  # made in the loop, at first need
        self._cur = 0
        self._probe = len(self._nodes) > 1
        self._bg: set = set()  # background tasks: releases, wait rounds
        self._waits: set = set()  # the queues of waiting acquires, woken by close()
        self._locks: set = set()  # held locks, reported lost by close()

    # ---- life cycle

    @property
    def addresses(self) -> list:
        """The addresses the client was given, without duplicates."""
        return [n.addr for n in self._nodes]

    @property
    def closed(self) -> bool:
        return self._closed

    def _closing_event(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
            if self._closed:
                self._closing.set()
        return self._closing

    async def close(self) -> None:
        """Close the client: held locks stop being renewed and are reported
        lost (ClosedError); the server frees them when their TTL passes.
        Background releases get up to the request timeout to finish."""
        if self._closed:
            return
        self._closed = True
        self._closing_event().set()
        for lk in list(self._locks):
            lk._client_closed()
        for q in list(self._waits):
            q.put_nowait(None)
        bg = [t for t in self._bg if not t.done()]
        if bg:
            await asyncio.wait(bg, timeout=self.request_timeout)
        for t in list(self._bg):
            t.cancel()
        if self._bg:
            await asyncio.wait(list(self._bg), timeout=self.request_timeout)
        for n in self._nodes:
            n.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _background(self, coro, name: str) -> asyncio.Task:
        """Run coro in a task that close() waits for."""
        t = asyncio.get_running_loop().create_task(coro, name=name)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)
        return t

    def open_connections(self) -> int:
        """How many connections the client has open (idle, in use, or a
        wait round's). For tests and monitoring."""
        return sum(1 for n in self._nodes for c in n.open if c.is_connected)

    # ---- choosing a node

    async def _pick(self, timeout: Optional[float] = None) -> Node:
        """The node to send the next request to, asking it who leads after a
        failure (and at first use); see fencer.Client._pick."""
        if timeout is None:
            timeout = self.request_timeout
        n, probe = self._nodes[self._cur], self._probe
        self._probe = False
        if not probe:
            return n
        try:
            v = await n.call(min(LEADER_PROBE_TIMEOUT, self.request_timeout, timeout), "FENCE.LEADER")
        except Exception:  # noqa: BLE001 - the request itself meets the failure
            return n
        if isinstance(v, list) and len(v) == 2:
            lead = self._node_at(text(v[1]))
            if lead is not None:
                if self._nodes[self._cur] is n:
                    self._cur = self._nodes.index(lead)
                n = self._nodes[self._cur]
        return n

    def _failed(self, n: Node, leader: str) -> None:
        """Move requests off n after a transient failure: to the leader it
        named, if that is one of the addresses, else to the next address."""
        if self._nodes[self._cur] is not n:
            return
        lead = self._node_at(leader)
        if lead is not None and lead is not n:
            self._cur = self._nodes.index(lead)
            return
        self._cur = (self._cur + 1) % len(self._nodes)
        self._probe = len(self._nodes) > 1

    def _node_at(self, addr: str) -> Optional[Node]:
        if not addr:
            return None
        for n in self._nodes:
            if n.addr == addr:
                return n
        return None

    async def _pause(self, seconds: float) -> bool:
        """Sleep for seconds; True if the client was closed meanwhile."""
        ev = self._closing_event()
        if ev.is_set():
            return True
        try:
            await within(ev.wait(), max(seconds, 0))
            return True
        except asyncio.TimeoutError:
            return False

    # ---- requests

    async def _exchange(
        self,
        args: Sequence,
        attempt_timeout: Optional[Callable[[], float]] = None,
        failover: Optional[float] = -1.0,
        alive: Optional[Callable[[], None]] = None,
    ):
        """Send args and return (reply, sent), retrying transient failures
        over the nodes: fencer.Client._exchange, with the same arguments."""
        if failover is not None and failover < 0:
            failover = self.failover_timeout
        start = now()
        backoff = MIN_BACKOFF
        last: Optional[FencerError] = None
        uncertain: Optional[FencerError] = None
        tries = 0
        while True:
            tries += 1
            if self._closed:
                raise ClosedError("client closed")
            if alive is not None:
                alive()
            timeout = attempt_timeout() if attempt_timeout is not None else self.request_timeout
            if timeout <= 0:
                raise self._unavailable(args, last, uncertain)
            n = await self._pick(timeout)
            if attempt_timeout is not None:
                timeout = attempt_timeout()
                if timeout <= 0:
                    raise self._unavailable(args, last, uncertain)
            sent = now()
            try:
                return await n.call(timeout, *args), sent
            except Exception as e:  # noqa: BLE001 - sorted by classify; CancelledError passes
                f = classify(e, n.addr)
                if not f.transient:
                    if is_refusal(f):
                        f.error.args = (f"{f.error.args[0]} (node {n.addr})",)
                    raise f.error from e
                last = f.error
                if f.uncertain:
                    uncertain = f.error
                self._failed(n, f.leader)
            elapsed = now() - start
            if failover is not None and elapsed >= failover:
                raise self._unavailable(args, last, uncertain)
            if tries % len(self._nodes) == 0:
                pause = jitter(backoff)
                if failover is not None:
                    pause = min(pause, failover - elapsed)
                if await self._pause(pause):
                    continue  # reported at the top of the loop
                backoff = min(2 * backoff, MAX_BACKOFF)
                if failover is not None and now() - start >= failover:
                    raise self._unavailable(args, last, uncertain)

    @staticmethod
    def _unavailable(args, last, uncertain) -> FencerError:
        what = text(args[0])
        if uncertain is not None:
            return UncertainError(
                f"{what}: outcome unknown, no node could confirm it (last uncertain failure: {uncertain})",
                last=uncertain,
                code=uncertain.code,
                reply=uncertain.reply,
            )
        if last is None:
            return NoLeaderError(f"{what}: no leader reachable")
        return NoLeaderError(f"{what}: no leader reachable (last error: {last})", last=last)

    # ---- locks

    def lock(
        self,
        name: str,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        auto_renew: bool = True,
        on_lost: Optional[Callable[[Lock, BaseException], None]] = None,
        owner: Optional[str] = None,
    ) -> Lock:
        """Return a Lock on ``name``, not acquired yet (``async with`` it,
        or ``await acquire()``); the arguments are fencer.Client.lock's.
        ``on_lost`` is called once, in the event loop, if the lease is lost."""
        return Lock(self, name, ttl=ttl, wait=wait, auto_renew=auto_renew, on_lost=on_lost, owner=owner)

    def _allowance(self, ttl: float) -> float:
        return ttl * self.drift + DRIFT_FLOOR

    async def _acquire(self, name: str, owner: str, ttl: float, wait: Optional[float]) -> Grant:
        """Get name for owner, waiting up to wait seconds (None: no bound).

        A grant arrives with part of its validity left, or this raises.
        Cancelled (or stopped by any exception) once the acquire may have
        taken effect, it releases in the background before it re-raises.
        """
        drift = self._allowance(ttl)
        if not name:
            raise InvalidArgumentError("empty lock name", argument="key")
        if ttl < 0.001 or ttl <= drift:
            raise InvalidArgumentError(f"ttl {ttl}s is too short", argument="ttl")
        deadline = None if wait is None else now() + max(wait, 0)
        release = True
        try:
            # The first request runs in a task of its own, which a
            # cancellation of the acquire does not cut short: its outcome
            # decides whether to release, and a release sent on another
            # connection while the request may not have reached the server
            # yet could overtake it (the server remembers only a release of
            # a lock the owner held), leaving the lock held by nobody until
            # its TTL.
            first = self._background(self._exchange(["FENCE.ACQUIRE", name, owner, millis(ttl)]), f"fencer-acquire-{name}")
            try:
                v, sent = await asyncio.shield(first)
            except asyncio.CancelledError:
                if not first.done():
                    release = False
                    first.add_done_callback(lambda t: self._release_unless_refused(t, name, owner))
                raise
            except _REFUSED:
                release = False  # refused before it took effect, or nothing can be sent
                raise
            g = parse_grant(v, ttl, sent)
            if g is None and (wait is None or wait > 0):
                release = False  # wait_acquire releases when it fails, gives up or is cancelled
                g = await wait_acquire(self, name, owner, ttl, deadline)
                release = True
            if g is None:
                release = False  # not granted, and not queued any more
                raise LockedError(f"lock {name!r} is held by another owner")
            if g.sent + g.ttl - drift > now():
                release = False
                return g
            try:
                v, sent = await self._exchange(["FENCE.EXTEND", name, owner, millis(ttl)])
            except FencerError:
                v, sent = None, 0.0
            if v == 1 and sent + g.ttl - drift > now():
                g.sent = sent
                release = False
                return g
            raise LeaseLostError(f"lock {name!r}: the grant arrived after its validity ended")
        except BaseException:
            if release:
                self._release_later(name, owner)
            raise

    def _release_unless_refused(self, first: asyncio.Task, name: str, owner: str) -> None:
        """Release for an acquire cancelled while its first request was in
        flight, once that request's outcome is known: unless it was answered
        null (not granted, not queued) or refused before it took effect."""
        if not first.cancelled():
            e = first.exception()
            if e is None and first.result()[0] is None:
                return
            if isinstance(e, _REFUSED):
                return
        self._release_later(name, owner)

    async def _release(self, name: str, owner: str) -> bool:
        v, _ = await self._exchange(["FENCE.RELEASE", name, owner])
        return v == 1

    def _release_later(self, name: str, owner: str) -> None:
        """Release in a background task, for an acquire whose outcome is
        unknown: the release is remembered, so a late grant cannot outlive
        the caller who gave up on it. Needs no await, so that a cancelled
        task can call it on its way out."""
        if self._closed:
            return

        async def run():
            # Sent again while answered "not held" (_grant.RELEASE_AGAIN says why).
            for pause in RELEASE_AGAIN + (None,):
                try:
                    if await self._release(name, owner):
                        return
                except FencerError:
                    return
                if pause is None or await self._pause(pause):
                    return

        self._background(run(), f"fencer-release-{name}")

    # ---- reads and administration

    async def status(self, name: str):
        """Return (owner, token, remaining seconds) of name's lease, or None if free."""
        v, _ = await self._exchange(["FENCE.STATUS", name])
        if v is None:
            return None
        return text(v[0]), int(v[1]), v[2] / 1000.0

    async def token(self, name: str, value=None) -> Optional[int]:
        """Return the token of name's current grant (of value's, if given), or None."""
        v, _ = await self._exchange(["FENCE.TOKEN", name] + ([] if value is None else [value]))
        return v

    async def check(self, name: str, token: int) -> bool:
        """Whether token is name's current, unexpired token (a point-in-time answer)."""
        v, _ = await self._exchange(["FENCE.CHECK", name, token])
        return v == 1

    async def revoke(self, name: str) -> bool:
        """Force-release name, whoever holds it (administration); True if a grant ended."""
        v, _ = await self._exchange(["FENCE.REVOKE", name])
        return v == 1

    async def leader(self):
        """Return (id, client address) of the leader as the current node knows it, or None."""
        v, _ = await self._exchange(["FENCE.LEADER"])
        if v is None:
            return None
        return text(v[0]), text(v[1])
