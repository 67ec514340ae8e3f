"""Lock: a lease on a named lock, its token, its renewal and its loss, in
asyncio (fencer/lock.py is the reference: the same states and rules, with
a renewal task and a timer task in place of threads)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Callable, Optional

from .._grant import DEFAULT_TTL, MIN_BACKOFF, jitter, millis, now
from ..errors import ClosedError, FencerError, LeaseLostError, ReleasedError

log = logging.getLogger("fencer")

# The shortest timeout a renewal attempt gets while the lease has that much
# validity left.
MIN_RENEW_ATTEMPT = 0.2

_DEFAULT = object()

_IDLE, _HELD, _LOST, _RELEASING, _RELEASED = "idle", "held", "lost", "releasing", "released"


class Lock:
    """A lock on one name, and while it is held, its lease::

        async with client.lock("orders/42", ttl=10) as lease:
            await store.write(..., lease.token)

    or ``await acquire()`` and ``await release()``. While held: ``token``,
    ``owner``, ``lost`` (an asyncio.Event set if the lease is lost),
    ``lost_reason``, ``valid_until`` and remaining(), as fencer.Lock's.
    """

    def __init__(
        self,
        client,
        name: str,
        ttl: float = DEFAULT_TTL,
        wait: Optional[float] = None,
        auto_renew: bool = True,
        on_lost: Optional[Callable[["Lock", BaseException], None]] = None,
        owner: Optional[str] = None,
    ):
        self.client = client
        self.name = name
        self.ttl = float(ttl)
        self.wait = wait
        self.auto_renew = auto_renew
        self.on_lost = on_lost
        self._fixed_owner = owner
        #: Set when the lease is lost (not when it is released).
        self.lost = asyncio.Event()
        #: Why the lease was lost: a LeaseLostError, or ClosedError.
        self.lost_reason: Optional[BaseException] = None
        self.owner: Optional[str] = None
        self.token: Optional[int] = None
        self._drift = client._allowance(self.ttl)
        self._state = _IDLE
        self._gen = 0  # bumped per lease and at release, so that old tasks stop
        self._sent = 0.0
        self._until = 0.0
        self._retry_at: Optional[float] = None
        self._tasks: set = set()  # this lease's renewal and timer
        self._release_mu = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<fencer.asyncio.Lock {self.name!r} {self._state} token={self.token}>"

    # ---- state

    @property
    def held(self) -> bool:
        """Whether the lease is held and valid by the client's count."""
        return self._state == _HELD and now() < self._until

    @property
    def valid_until(self) -> float:
        """End of the lease's validity as the client counts it, a time.monotonic() value."""
        return self._until

    def remaining(self) -> float:
        """Seconds of validity left (0 once lost, released, or run out)."""
        if self._state != _HELD:
            return 0.0
        return max(self._until - now(), 0.0)

    # ---- acquire

    async def acquire(self, wait=_DEFAULT) -> "Lock":
        """Acquire the lock and return self; ``wait`` overrides the Lock's.

        Waits in the server's queue, first come first served. Cancelled
        while it may have been granted or queued, it leaves the queue and
        releases in the background (within a round trip) before the
        CancelledError goes on.
        """
        if wait is _DEFAULT:
            wait = self.wait
        if self._state in (_HELD, _RELEASING):
            raise RuntimeError(f"lock {self.name!r} is already held by this Lock; release it first")
        owner = self._fixed_owner or secrets.token_hex(16)
        g = await self.client._acquire(self.name, owner, self.ttl, wait)
        # No await from here to the end: the grant becomes the lease at once.
        self._gen += 1
        gen = self._gen
        self.owner, self.token = owner, g.token
        self._sent, self._until = g.sent, g.sent + g.ttl - self._drift
        self._retry_at = None
        self._state = _HELD
        self.lost_reason = None
        self.lost.clear()
        if self.client.closed:
            self._client_closed()
            return self
        self.client._locks.add(self)
        self._start(self._watch(gen), f"fencer-validity-{self.name}")
        if self.auto_renew:
            self._start(self._keep(gen), f"fencer-renew-{self.name}")
        return self

    def _start(self, coro, name: str) -> None:
        t = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def _stop_tasks(self) -> None:
        me = asyncio.current_task()
        for t in list(self._tasks):
            if t is not me:
                t.cancel()

    async def __aenter__(self) -> "Lock":
        return await self.acquire()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            await self.release()
            return
        try:
            await self.release()
        except FencerError as e:
            log.warning("fencer: releasing %r after an exception: %s", self.name, e)

    # ---- extend

    async def extend(self) -> None:
        """Renew the lease for its TTL from now (see fencer.Lock.extend)."""
        self._check_held()
        await self._extend(self._gen)

    def _check_held(self) -> None:
        if self._state == _HELD:
            return
        if self._state == _LOST:
            raise self.lost_reason  # type: ignore[misc]
        if self._state in (_RELEASING, _RELEASED):
            raise ReleasedError(f"lock {self.name!r} was released")
        raise ReleasedError(f"lock {self.name!r} is not held")

    def _alive(self, gen: int) -> Callable[[], None]:
        def check():
            if self._gen != gen:
                raise ReleasedError(f"lock {self.name!r} was released")
            self._check_held()

        return check

    def _attempt_timeout(self) -> float:
        left = self._until - now()
        rt = self.client.request_timeout
        if len(self.client._nodes) == 1:
            return min(rt, left)
        return min(rt, max(left / 2, min(left, MIN_RENEW_ATTEMPT)))

    async def _extend(self, gen: int) -> None:
        name, owner = self.name, self.owner
        try:
            v, sent = await self.client._exchange(
                ["FENCE.EXTEND", name, owner, millis(self.ttl)],
                attempt_timeout=self._attempt_timeout,
                failover=None,
                alive=self._alive(gen),
            )
        except FencerError:
            if self._gen == gen and self._state == _HELD and now() >= self._until:
                self._expired(gen)
            self._alive(gen)()
            raise
        if v != 1:
            self._declare_lost(gen, LeaseLostError(f"lock {name!r}: the server says owner {owner} no longer holds it"))
            self._alive(gen)()
            return
        if self._gen == gen and self._state == _HELD and sent > self._sent:
            self._sent, self._until = sent, sent + self.ttl - self._drift
        self._alive(gen)()

    # ---- loss

    def _expired(self, gen: int) -> None:
        self._declare_lost(gen, LeaseLostError(f"lock {self.name!r}: its validity ran out before a renewal succeeded"))

    def _declare_lost(self, gen: int, reason: BaseException) -> None:
        if self._gen != gen or self._state != _HELD:
            return
        self._state = _LOST
        self.lost_reason = reason
        self.lost.set()
        self.client._locks.discard(self)
        self._stop_tasks()
        if self.on_lost is not None:
            try:
                self.on_lost(self, reason)
            except Exception:  # noqa: BLE001 - a callback's bug must not stop the others
                log.exception("fencer: on_lost callback of %r raised", self.name)

    def _client_closed(self) -> None:
        self._declare_lost(self._gen, ClosedError("client closed: the lease is no longer renewed"))

    async def _watch(self, gen: int) -> None:
        """Declare the lease lost when its validity runs out: a task of its
        own, so that a renewal stuck on a node that does not answer does not
        delay the loss. A renewal only moves the end later, so sleeping to
        the end known now is never late."""
        while self._gen == gen and self._state == _HELD:
            left = self._until - now()
            if left <= 0:
                self._expired(gen)
                return
            await asyncio.sleep(left)

    async def _keep(self, gen: int) -> None:
        """Renew the lease about every TTL/3; the loss is _watch's to declare."""
        while self._gen == gen and self._state == _HELD:
            t = now()
            if t >= self._until:
                return
            due = self._retry_at if self._retry_at is not None else self._sent + self.ttl / 3
            if t < due:
                await asyncio.sleep(min(due, self._until) - t)
                continue
            try:
                await self._extend(gen)
                self._retry_at = None
            except Exception as e:  # noqa: BLE001 - retried while the lease is valid
                if self._gen != gen or self._state != _HELD:
                    return
                self._retry_at = now() + jitter(4 * MIN_BACKOFF)
                log.debug("fencer: renewing %r: %s", self.name, e)

    # ---- release

    async def release(self) -> None:
        """Release the lock: stop renewals and free it on the server, handing
        it to the first waiter (see fencer.Lock.release). Cancelled while
        the release is in flight, it goes on in the background."""
        async with self._release_mu:
            if self._state in (_IDLE, _RELEASED):
                return
            was_lost = self._state == _LOST
            self._state = _RELEASING
            self._gen += 1
            self._stop_tasks()
            self.client._locks.discard(self)
            name, owner = self.name, self.owner
            try:
                ok = await self.client._release(name, owner)
            except asyncio.CancelledError:
                self.client._release_later(name, owner)
                self._state = _RELEASED
                raise
            self._state = _RELEASED
            if not ok:
                reason = self.lost_reason if was_lost and self.lost_reason is not None else None
                raise LeaseLostError(
                    f"lock {name!r}: the server says owner {owner} no longer held it"
                    + (f" ({reason})" if reason is not None else "")
                )
