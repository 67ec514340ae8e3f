"""The fencer client: addresses, retries, leader following.

The Go client (client/client.go) is the reference for what this module
does; the comments say where Python differs.
"""

from __future__ import annotations

import ssl as _ssl
import threading
import weakref
from typing import Callable, Iterable, Optional, Sequence, Union

from ._conn import Node, classify, is_refusal
from ._grant import (
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
from ._wait import wait_acquire
from .errors import (
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
from .lock import Lock

SSLArg = Union[None, bool, _ssl.SSLContext]


class Client:
    """A client of a fencer cluster, through any subset of its nodes' addresses.

    Every node accepts every command (followers forward to the leader), so
    one address is enough while that node is up; give several to survive
    its loss. The client asks a node who leads and sends its requests
    there when the leader is one of its addresses, and follows the leader
    a ``NOTLEADER`` reply names. A Client is safe to share between threads.

    ``addresses``: ``"host:port"`` strings (or one string, comma-separated).
    ``username``/``password``: authenticate every connection (``AUTH``), as
    fencerd requires with ``--requirepass`` (username None or "default")
    or ``--users``. ``ssl``: None for plain TCP, True for TLS verified
    against the system's CAs, or an ``ssl.SSLContext`` (to trust a private
    CA, present a client certificate); a node's certificate is checked
    against the host of its address. ``request_timeout`` bounds one attempt
    at one node, in seconds (a waiting acquire gets its wait on top);
    ``failover_timeout`` bounds how long a request keeps trying the nodes
    while none can serve it; ``drift`` is the clock drift allowance, a
    fraction of each lease's TTL.
    """

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
        addrs: list[str] = []
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
        self._nodes: list[Node] = []
        for a in addrs:
            try:
                self._nodes.append(
                    Node(a, username=username, password=password, ssl_context=ctx, request_timeout=self.request_timeout)
                )
            except ValueError as e:
                raise InvalidArgumentError(str(e)) from None
        self._closed = threading.Event()
        self._mu = threading.Lock()  # guards _cur, _probe
        self._cur = 0
        self._probe = len(self._nodes) > 1
        self._bg_mu = threading.Lock()  # guards _bg, _waits
        self._bg: set[threading.Thread] = set()
        self._waits: set = set()
        self._locks: "weakref.WeakSet" = weakref.WeakSet()

    # ---- life cycle

    @property
    def addresses(self) -> list[str]:
        """The addresses the client was given, without duplicates."""
        return [n.addr for n in self._nodes]

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Close the client.

        Its held locks stop being renewed and are reported lost (reason
        :class:`ClosedError`); the server frees them when their TTL passes.
        Release locks first to free them at once.
        """
        if self._closed.is_set():
            return
        self._closed.set()
        for lk in list(self._locks):
            lk._client_closed()
        with self._bg_mu:
            waits = list(self._waits)
            threads = list(self._bg)
        for w in waits:
            w.put(None)
        for t in threads:
            t.join(self.request_timeout)
        for n in self._nodes:
            n.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _background(self, target: Callable[[], None], name: str) -> None:
        """Run target in a thread that close() waits for."""

        def run():
            try:
                target()
            finally:
                with self._bg_mu:
                    self._bg.discard(threading.current_thread())

        t = threading.Thread(target=run, name=name, daemon=True)
        with self._bg_mu:
            self._bg.add(t)
        t.start()

    # ---- choosing a node

    def _pick(self, timeout: Optional[float] = None) -> Node:
        """Return the node to send the next request to.

        After a failure (and at first use) it asks that node who leads, and
        moves to the leader if the leader is one of the client's addresses,
        saving the forwarding hop. A failed probe changes nothing: the
        request itself meets the failure. The probe takes no longer than
        timeout (the attempt's), so that a renewal's probe stays within the
        validity left.
        """
        if timeout is None:
            timeout = self.request_timeout
        with self._mu:
            n, probe = self._nodes[self._cur], self._probe
            self._probe = False
        if not probe:
            return n
        try:
            v = n.call(min(LEADER_PROBE_TIMEOUT, self.request_timeout, timeout), "FENCE.LEADER")
        except Exception:
            return n
        if isinstance(v, list) and len(v) == 2:
            lead = self._node_at(text(v[1]))
            if lead is not None:
                with self._mu:
                    if self._nodes[self._cur] is n:
                        self._cur = self._nodes.index(lead)
                    n = self._nodes[self._cur]
        return n

    def _failed(self, n: Node, leader: str) -> None:
        """Move requests off n after a transient failure: to the leader it
        named, if that is one of the addresses, else to the next address."""
        with self._mu:
            if self._nodes[self._cur] is not n:
                return  # someone else moved already
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

    # ---- requests

    def _exchange(
        self,
        args: Sequence,
        attempt_timeout: Optional[Callable[[], float]] = None,
        failover: Optional[float] = -1.0,
        alive: Optional[Callable[[], None]] = None,
    ):
        """Send args and return (reply, sent): the reply and the monotonic
        time just before the attempt that produced it was sent.

        Transient failures are retried on the next node, and after a round
        over all nodes with a growing pause, until ``failover`` seconds have
        passed (the client's failover timeout by default, None for no
        bound), ``attempt_timeout()`` (the timeout of the next attempt)
        says stop by returning zero or less, or ``alive()`` raises. Only
        commands that are safe to repeat may go through it. An error reply
        that is not transient is raised as its exception at once.
        """
        if failover is not None and failover < 0:
            failover = self.failover_timeout
        start = now()
        backoff = MIN_BACKOFF
        last: Optional[FencerError] = None
        uncertain: Optional[FencerError] = None
        tries = 0
        while True:
            tries += 1
            if self._closed.is_set():
                raise ClosedError("client closed")
            if alive is not None:
                alive()
            timeout = attempt_timeout() if attempt_timeout is not None else self.request_timeout
            if timeout <= 0:
                raise self._unavailable(args, last, uncertain)
            n = self._pick(timeout)
            if attempt_timeout is not None:
                timeout = attempt_timeout()  # less what the probe took
                if timeout <= 0:
                    raise self._unavailable(args, last, uncertain)
            sent = now()
            try:
                return n.call(timeout, *args), sent
            except Exception as e:  # noqa: BLE001 - sorted by classify
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
                if self._closed.wait(max(pause, 0)):
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
        on_lost: Optional[Callable[["Lock", BaseException], None]] = None,
        owner: Optional[str] = None,
    ) -> "Lock":
        """Return a Lock on ``name`` (not acquired yet: use ``with`` or acquire()).

        ``ttl``: the lease's time to live in seconds (the server accepts 0.1
        to 86400 by default). ``wait``: how long acquire() waits for the
        lock, in seconds, in the server's FIFO queue: None waits until it is
        granted, 0 does not wait (LockedError at once). ``auto_renew``:
        extend the lease in the background about every TTL/3.
        ``on_lost(lock, reason)``: called once, from a background thread, if
        the lease is lost (reason is a LeaseLostError, or ClosedError when
        the client is closed). ``owner``: the owner value sent to the server
        instead of a fresh random one per acquire; it must be unique per lease.
        """
        return Lock(self, name, ttl=ttl, wait=wait, auto_renew=auto_renew, on_lost=on_lost, owner=owner)

    def _allowance(self, ttl: float) -> float:
        return ttl * self.drift + DRIFT_FLOOR

    def _acquire(self, name: str, owner: str, ttl: float, wait: Optional[float]) -> Grant:
        """Get name for owner, waiting up to wait seconds (None: no bound).

        A grant arrives with part of its validity left, or this raises.
        """
        drift = self._allowance(ttl)
        if not name:
            raise InvalidArgumentError("empty lock name", argument="key")
        if ttl < 0.001 or ttl <= drift:
            raise InvalidArgumentError(f"ttl {ttl}s is too short", argument="ttl")
        deadline = None if wait is None else now() + max(wait, 0)
        # Whether a failure from here leaves something to release: an
        # acquire that may have been granted, or queued. Any exception
        # counts, KeyboardInterrupt and one from a signal handler included.
        release = True
        try:
            try:
                v, sent = self._exchange(["FENCE.ACQUIRE", name, owner, millis(ttl)])
            except (InvalidArgumentError, ClosedError, AuthError, NoPermError, TLSError):
                release = False  # refused before it took effect, or nothing can be sent
                raise
            g = parse_grant(v, ttl, sent)
            if g is None and (wait is None or wait > 0):
                release = False  # wait_acquire releases when it fails or gives up
                g = wait_acquire(self, name, owner, ttl, deadline)
                release = True
            if g is None:
                release = False  # not granted, and not queued any more
                raise LockedError(f"lock {name!r} is held by another owner")
            if g.sent + g.ttl - drift > now():
                release = False
                return g
            # The grant took longer than its validity to arrive: renew it,
            # which counts from now, or give it up.
            try:
                v, sent = self._exchange(["FENCE.EXTEND", name, owner, millis(ttl)])
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

    def _release(self, name: str, owner: str) -> bool:
        """Free name if owner holds it; False if the server says owner
        neither holds it nor released it last."""
        v, _ = self._exchange(["FENCE.RELEASE", name, owner])
        return v == 1

    def _release_later(self, name: str, owner: str) -> None:
        """Release in the background, for an acquire whose outcome is
        unknown: the release is remembered, so a late grant cannot outlive
        the caller who gave up on it."""
        if self._closed.is_set():
            return

        def run():
            # Sent again while answered "not held", as fencer.asyncio's
            # (_grant.RELEASE_AGAIN says why).
            for pause in RELEASE_AGAIN + (None,):
                try:
                    if self._release(name, owner):
                        return
                except FencerError:
                    return
                if pause is None or self._closed.wait(pause):
                    return

        self._background(run, f"fencer-release-{name}")

    # ---- reads and administration

    def status(self, name: str):
        """Return (owner, token, remaining seconds) of name's lease, or None if free."""
        v, _ = self._exchange(["FENCE.STATUS", name])
        if v is None:
            return None
        return text(v[0]), int(v[1]), v[2] / 1000.0

    def token(self, name: str, value: Optional[Union[str, bytes]] = None) -> Optional[int]:
        """Return the token of name's current grant (of value's, if given), or None."""
        args = ["FENCE.TOKEN", name] + ([] if value is None else [value])
        v, _ = self._exchange(args)
        return v

    def check(self, name: str, token: int) -> bool:
        """Whether token is name's current, unexpired token (a point-in-time answer)."""
        v, _ = self._exchange(["FENCE.CHECK", name, token])
        return v == 1

    def revoke(self, name: str) -> bool:
        """Force-release name, whoever holds it (administration); True if a grant ended."""
        v, _ = self._exchange(["FENCE.REVOKE", name])
        return v == 1

    def leader(self):
        """Return (id, client address) of the leader as the current node knows it, or None."""
        v, _ = self._exchange(["FENCE.LEADER"])
        if v is None:
            return None
        return text(v[0]), text(v[1])
