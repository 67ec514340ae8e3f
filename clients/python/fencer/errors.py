"""Exceptions of the fencer client, and how error replies map to them.

An error reply is a code (its first word) and a text; the client reads only
the code, and the fields of the codes that have them (docs/protocol.md,
"Errors"). The classes mirror the Go client's errors (client/errors.go).
"""

from __future__ import annotations

__all__ = [
    "FencerError",
    "LockedError",
    "LeaseLostError",
    "ReleasedError",
    "NoLeaderError",
    "UncertainError",
    "InvalidArgumentError",
    "AuthError",
    "NoPermError",
    "TLSError",
    "ClosedError",
    "ValueReleasedError",
    "ReplyError",
]


class FencerError(Exception):
    """Base class of every exception this package raises.

    ``code`` is the code of the server's error reply that caused it, if one
    did (``"ERR"``, ``"NOPERM"`` ...), and ``reply`` that reply's full text.
    """

    def __init__(self, message: str = "", *, code: str | None = None, reply: str | None = None):
        super().__init__(message)
        self.code = code
        self.reply = reply


class LockedError(FencerError):
    """Another owner holds the lock (or the wait for it ended first).

    Also raised when the server remembers this owner's own release of the
    lock: an owner value serves one lease only.
    """


class LeaseLostError(FencerError):
    """A lease ended without being released.

    The server said its owner no longer holds the lock (FENCE.EXTEND or
    FENCE.RELEASE answered 0), or the client-side validity ran out before a
    renewal succeeded. Work done under the lease after that is unprotected:
    the fencing token is what keeps it out of storage.
    """


class ReleasedError(FencerError):
    """The lease was released: it can no longer be extended."""


class NoLeaderError(FencerError):
    """No node could serve the request within the failover timeout.

    Every address was unreachable, or the cluster had no leader, and no
    attempt's outcome was unknown (that is :class:`UncertainError`).
    ``last`` is the last failure, if any.
    """

    def __init__(self, message: str = "", *, last: BaseException | None = None, **kw):
        super().__init__(message, **kw)
        self.last = last


class UncertainError(FencerError):
    """The outcome of a request is unknown: it may or may not have taken effect.

    Raised when the server answered ``UNCERTAIN`` (leadership lost while the
    command was in flight, a deadline, forwarding failed after sending), or
    the connection dropped or timed out after the request was sent, and the
    client gave up retrying. It is never a "no". The client retries the
    native acquire, extend and release itself (they are safe to repeat with
    the same owner); after an acquire that ends with this error it releases
    the lock in the background, so a late grant cannot outlive the caller.
    """

    def __init__(self, message: str = "", *, last: BaseException | None = None, **kw):
        super().__init__(message, **kw)
        self.last = last


class InvalidArgumentError(FencerError, ValueError):
    """The request itself is wrong; nothing was done.

    ``argument`` names the argument to change when the server said
    ``ERR invalid argument: <argument>: <reason>`` (``key``, ``owner``,
    ``ttl``, ``wait`` ...), else it is None; ``reason`` is the rest.
    """

    def __init__(self, message: str = "", *, argument: str | None = None, reason: str | None = None, **kw):
        super().__init__(message, **kw)
        self.argument = argument
        self.reason = reason


class AuthError(FencerError):
    """The server refused the credentials (WRONGPASS), or requires some (NOAUTH).

    Not retried on other nodes: the nodes of a cluster share their users.
    """


class NoPermError(FencerError):
    """The authenticated user may not touch that lock or run that command (NOPERM)."""


class TLSError(FencerError):
    """A TLS handshake failed for a reason a retry would meet again.

    The node's certificate did not verify, the node refused the client's
    certificate (or its absence), or the node does not speak TLS.
    """


class ClosedError(FencerError):
    """The client was closed."""


class ValueReleasedError(FencerError):
    """A server run with ``--redlock-multi-endpoint`` refused a write (RELEASED).

    The write, through the Redis-compatible commands, was of the value whose
    release is the newest of the key the server remembers. Nothing was done:
    that value holds no lock on the key; take the lock with a new value.
    """


class ReplyError(FencerError):
    """An error reply with a code the client has no class for (``WRONGTYPE`` ...)."""


# Codes whose requests did nothing and may be sent again, to another node:
# the cluster had no leader, the deadline passed before proposing, the node
# is shutting down. UNCERTAIN and NOTLEADER are handled apart.
_TRANSIENT = frozenset({"NOLEADER", "TIMEOUT", "SHUTDOWN"})

_INVALID_PREFIX = "invalid argument: "


def split_reply(reply: str) -> tuple[str, str]:
    """Return the code (first word) and the text of an error reply."""
    reply = reply.lstrip()
    code, _, text = reply.partition(" ")
    return code, text


def _unfield(word: str) -> str | None:
    """Decode one field of NOTLEADER: "-" is unknown, %XX escapes a byte."""
    if word == "-":
        return ""
    out = bytearray()
    i = 0
    raw = word.encode("utf-8", "surrogateescape")
    while i < len(raw):
        if raw[i] == 0x25:  # %
            if i + 3 > len(raw):
                return None
            try:
                out.append(int(raw[i + 1 : i + 3].decode("ascii"), 16))
            except (ValueError, UnicodeDecodeError):
                return None
            i += 3
            continue
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "replace")


def parse_not_leader(text: str) -> tuple[str, str]:
    """Return the leader's ID and client address from NOTLEADER's text.

    Either is "" when the node did not know it (or the field is malformed).
    """
    f = text.split()
    if len(f) < 2:
        return "", ""
    ident, addr = _unfield(f[0]), _unfield(f[1])
    if ident is None or addr is None:
        return "", ""
    if addr and ":" not in addr:
        addr = ""
    return ident, addr


def parse_invalid_argument(text: str) -> tuple[str | None, str | None]:
    """Return the argument and reason of ``ERR invalid argument: <arg>: <reason>``."""
    if not text.startswith(_INVALID_PREFIX):
        return None, None
    arg, sep, reason = text[len(_INVALID_PREFIX) :].partition(": ")
    if not sep or not arg or any(c in arg for c in " \t"):
        return None, None
    return arg, reason


class Failure:
    """What the client makes of one error reply (or network failure).

    ``transient`` failures are retried on another node; ``uncertain`` ones
    too, but they leave the outcome unknown; ``leader`` is the leader's
    client address when a NOTLEADER reply named it; ``error`` is the
    exception to raise if the client stops there.
    """

    __slots__ = ("error", "transient", "uncertain", "leader", "argument")

    def __init__(self, error, transient=False, uncertain=False, leader="", argument=None):
        self.error = error
        self.transient = transient
        self.uncertain = uncertain
        self.leader = leader
        self.argument = argument


def classify_reply(reply: str) -> Failure:
    """Sort an error reply by its code (docs/protocol.md, "Errors")."""
    code, text = split_reply(reply)
    kw = {"code": code, "reply": reply}
    if code == "UNCERTAIN":
        return Failure(UncertainError(reply, **kw), transient=True, uncertain=True)
    if code in _TRANSIENT:
        return Failure(NoLeaderError(reply, **kw), transient=True)
    if code == "NOTLEADER":
        _, addr = parse_not_leader(text)
        return Failure(NoLeaderError(reply, **kw), transient=True, leader=addr)
    if code in ("WRONGPASS", "NOAUTH"):
        return Failure(AuthError(reply, **kw))
    if code == "NOPERM":
        return Failure(NoPermError(reply, **kw))
    if code == "RELEASED":
        return Failure(ValueReleasedError(reply, **kw))
    if code == "LEASELOST":
        return Failure(LeaseLostError(reply, **kw))
    if code == "ERR":
        arg, reason = parse_invalid_argument(text)
        return Failure(InvalidArgumentError(reply, argument=arg, reason=reason, **kw), argument=arg)
    return Failure(ReplyError(reply, **kw))


def error_for_reply(reply: str) -> FencerError:
    """Return the exception for an error reply, by its code."""
    return classify_reply(reply).error
