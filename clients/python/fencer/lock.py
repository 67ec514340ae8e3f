"""Lock: a lease on a named lock, its token, its renewal and its loss."""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Callable, Optional

from ._grant import DEFAULT_TTL, MIN_BACKOFF, jitter, millis, now
from .errors import ClosedError, FencerError, LeaseLostError, ReleasedError

log = logging.getLogger("fencer")

# The shortest timeout a renewal attempt gets while the lease has that much
# validity left.
MIN_RENEW_ATTEMPT = 0.2

_DEFAULT = object()

# States of a Lock.
_IDLE, _HELD, _LOST, _RELEASING, _RELEASED = "idle", "held", "lost", "releasing", "released"


def random_owner() -> str:
    """16 random bytes in hex, as the Go client's owners."""
    return secrets.token_hex(16)


class Lock:
    """A lock on one name, and while it is held, its lease.

    Use it as a context manager::

        with client.lock("orders/42", ttl=10) as lease:
            store.write(..., lease.token)

    or call acquire() and release(). While held: ``token`` is the fencing
    token (an int, larger than every earlier grant's of the same lock; pass
    it with every write to the storage the lock protects), ``owner`` the
    owner value sent to the server, ``lost`` a threading.Event set if the
    lease is lost, ``valid_until`` (a time.monotonic() value) and
    remaining() how long the client counts it valid.

    A Lock can be acquired again after it was released or lost: each
    acquire uses a fresh owner and gets a new token.
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
        self.lost = threading.Event()
        #: Why the lease was lost: a LeaseLostError, or ClosedError.
        self.lost_reason: Optional[BaseException] = None
        self.owner: Optional[str] = None
        self.token: Optional[int] = None
        self._drift = client._allowance(self.ttl)
        # _cond's lock guards the lease's state: _state, _gen, _sent,
        # _until, _retry_at, owner, token, lost_reason.
        self._cond = threading.Condition(threading.Lock())
        self._state = _IDLE
        self._gen = 0  # bumped per lease, so that an old keeper stops
        self._sent = 0.0  # before the last request that granted or extended the lease
        self._until = 0.0  # client-side validity end
        self._retry_at: Optional[float] = None
        self._release_mu = threading.Lock()  # serializes release()
        client._locks.add(self)

    def __repr__(self) -> str:
        return f"<fencer.Lock {self.name!r} {self._state} token={self.token}>"

    # ---- state

    @property
    def held(self) -> bool:
        """Whether the lease is held and valid by the client's count."""
        with self._cond:
            return self._state == _HELD and now() < self._until

    @property
    def valid_until(self) -> float:
        """End of the lease's validity as the client counts it, a time.monotonic() value.

        Counted from just before the request that granted or last extended
        the lease was sent: the TTL less a drift allowance. The server frees
        the lock no earlier than that.
        """
        with self._cond:
            return self._until

    def remaining(self) -> float:
        """Seconds of validity left (0 once lost, released, or run out)."""
        with self._cond:
            if self._state != _HELD:
                return 0.0
            return max(self._until - now(), 0.0)

    # ---- acquire

    def acquire(self, wait=_DEFAULT) -> "Lock":
        """Acquire the lock and return self.

        ``wait`` (seconds; None: until granted; 0: not at all) overrides the
        Lock's. It waits in the server's queue, first come first served; it
        does not poll. Raises LockedError if the wait ends first,
        NoLeaderError or UncertainError if no node could serve it,
        InvalidArgumentError for a bad name or TTL.
        """
        if wait is _DEFAULT:
            wait = self.wait
        with self._cond:
            if self._state in (_HELD, _RELEASING):
                raise RuntimeError(f"lock {self.name!r} is already held by this Lock; release it first")
        owner = self._fixed_owner or random_owner()
        g = self.client._acquire(self.name, owner, self.ttl, wait)
        with self._cond:
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
        else:
            threading.Thread(target=self._watch, args=(gen,), name=f"fencer-validity-{self.name}", daemon=True).start()
            if self.auto_renew:
                threading.Thread(target=self._keep, args=(gen,), name=f"fencer-renew-{self.name}", daemon=True).start()
        return self

    def __enter__(self) -> "Lock":
        return self.acquire()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.release()
            return
        # Do not hide the block's own exception behind a failed release.
        try:
            self.release()
        except FencerError as e:
            log.warning("fencer: releasing %r after an exception: %s", self.name, e)

    # ---- extend

    def extend(self) -> None:
        """Renew the lease for its TTL from now.

        Transient failures are retried on the other addresses while the
        lease is valid. Raises LeaseLostError (and reports the loss) if the
        server says the owner no longer holds the lock or the validity ran
        out; ReleasedError after release().
        """
        self._extend(self._current_gen())

    def _current_gen(self) -> int:
        with self._cond:
            self._check_held()
            return self._gen

    def _check_held(self) -> None:
        """Raise why the lease cannot be used, if it cannot (lock held)."""
        if self._state == _HELD:
            return
        if self._state == _LOST:
            raise self.lost_reason  # type: ignore[misc]
        if self._state in (_RELEASING, _RELEASED):
            raise ReleasedError(f"lock {self.name!r} was released")
        raise ReleasedError(f"lock {self.name!r} is not held")

    def _alive(self, gen: int) -> Callable[[], None]:
        def check():
            with self._cond:
                if self._gen != gen:
                    raise ReleasedError(f"lock {self.name!r} was released")
                self._check_held()

        return check

    def _attempt_timeout(self) -> float:
        """Bounds one renewal attempt. With other nodes to try, an attempt
        gets half the validity left (at least MIN_RENEW_ATTEMPT of it), so
        that a node that hangs leaves time for the next; with one node, a
        retry could only go to the same node, so it gets all of it."""
        with self._cond:
            left = self._until - now()
        rt = self.client.request_timeout
        if len(self.client._nodes) == 1:
            return min(rt, left)
        return min(rt, max(left / 2, min(left, MIN_RENEW_ATTEMPT)))

    def _extend(self, gen: int) -> None:
        with self._cond:
            name, owner = self.name, self.owner
        try:
            v, sent = self.client._exchange(
                ["FENCE.EXTEND", name, owner, millis(self.ttl)],
                attempt_timeout=self._attempt_timeout,
                failover=None,
                alive=self._alive(gen),
            )
        except FencerError:
            with self._cond:
                ran_out = self._gen == gen and self._state == _HELD and now() >= self._until
            if ran_out:
                self._expired(gen)
            self._alive(gen)()  # raises the reason if the lease was lost meanwhile
            raise
        if v != 1:
            self._declare_lost(gen, LeaseLostError(f"lock {name!r}: the server says owner {owner} no longer holds it"))
            self._alive(gen)()
            return
        with self._cond:
            if self._gen == gen and self._state == _HELD and sent > self._sent:
                self._sent, self._until = sent, sent + self.ttl - self._drift
                self._cond.notify_all()
        # A reply of 1 that came back after the lease was declared lost (its
        # validity ran out, the client closed) does not undo the loss.
        self._alive(gen)()

    # ---- loss

    def _expired(self, gen: int) -> None:
        self._declare_lost(gen, LeaseLostError(f"lock {self.name!r}: its validity ran out before a renewal succeeded"))

    def _declare_lost(self, gen: int, reason: BaseException) -> None:
        """Mark the lease lost, once, and call on_lost outside the lock."""
        with self._cond:
            if self._gen != gen or self._state != _HELD:
                return
            self._state = _LOST
            self.lost_reason = reason
            self.lost.set()
            self._cond.notify_all()
        if self.on_lost is not None:
            try:
                self.on_lost(self, reason)
            except Exception:  # noqa: BLE001 - a callback's bug must not kill the keeper
                log.exception("fencer: on_lost callback of %r raised", self.name)

    def _client_closed(self) -> None:
        with self._cond:
            gen = self._gen
        self._declare_lost(gen, ClosedError("client closed: the lease is no longer renewed"))

    def _watch(self, gen: int) -> None:
        """Declare the lease lost when its validity runs out. A thread of
        its own, apart from the renewals: a renewal stuck on a node that
        does not answer must not delay the loss. A renewal that succeeds
        moves _until and wakes it."""
        with self._cond:
            while True:
                if self._gen != gen or self._state != _HELD:
                    return
                left = self._until - now()
                if left <= 0:
                    break
                self._cond.wait(left)
        self._expired(gen)

    def _keep(self, gen: int) -> None:
        """Renew the lease about every TTL/3 (auto_renew). The loss is
        _watch's to declare."""
        while True:
            with self._cond:
                if self._gen != gen or self._state != _HELD:
                    return
                t = now()
                if t >= self._until:
                    return
                due = self._retry_at if self._retry_at is not None else self._sent + self.ttl / 3
                if t < due:
                    self._cond.wait(min(due, self._until) - t)
                    continue
            try:
                self._extend(gen)
                with self._cond:
                    self._retry_at = None
            except Exception as e:  # noqa: BLE001 - retried while the lease is valid
                with self._cond:
                    if self._gen != gen or self._state != _HELD:
                        return
                    # No verdict, and the lease is still valid (an
                    # unexpected reply, say): try again soon; the validity
                    # ends it unless a later renewal succeeds.
                    self._retry_at = now() + jitter(4 * MIN_BACKOFF)
                log.debug("fencer: renewing %r: %s", self.name, e)

    # ---- release

    def release(self) -> None:
        """Release the lock: stop renewals and free it on the server, handing
        it to the first waiter.

        Transient failures are retried on the other addresses (within the
        failover timeout). Raises LeaseLostError if the server says the owner
        no longer held it. Calling it again after it succeeded (or on a Lock
        never acquired) does nothing.
        """
        with self._release_mu:
            with self._cond:
                if self._state in (_IDLE, _RELEASED):
                    return
                was_lost = self._state == _LOST
                # Stop the keeper first, so that work under the lease stops
                # being renewed before another owner can be granted the lock.
                self._state = _RELEASING
                self._gen += 1
                self._cond.notify_all()
                name, owner = self.name, self.owner
            ok = self.client._release(name, owner)
            with self._cond:
                self._state = _RELEASED
            if not ok:
                reason = self.lost_reason if was_lost and self.lost_reason is not None else None
                raise LeaseLostError(
                    f"lock {name!r}: the server says owner {owner} no longer held it"
                    + (f" ({reason})" if reason is not None else "")
                )
