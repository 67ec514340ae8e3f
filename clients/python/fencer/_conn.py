"""Connections to one node, on redis-py's Connection.

redis-py strips the code off some error replies (``ERR``, ``NOAUTH``,
``NOPERM`` ...) and keeps it on others; the parser here keeps every reply
whole on the exception (``fencer_reply``), so that the client switches on
the code as docs/protocol.md defines it, never on redis-py's classes.
"""

from __future__ import annotations

import importlib.util
import ssl as _ssl
import threading
from typing import Optional

import redis

try:
    from redis.connection import PythonParser  # redis-py 4
except ImportError:  # redis-py 5 and later moved the parsers
    from redis._parsers import _RESP2Parser as PythonParser

from .errors import AuthError, Failure, NoLeaderError, TLSError, UncertainError, classify_reply




def redis_version(v: Optional[str] = None) -> tuple:
    """redis-py's version (or v) as (major, minor, patch)."""
    if v is None:
        v = redis.__version__
    out = []
    for part in v.split(".")[:3]:
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        out.append(int(digits or 0))
    return tuple(out + [0] * (3 - len(out)))


# How a connection starts, the same on every redis-py: RESP2, which
# docs/protocol.md describes the replies in (redis-py 8 asks for RESP3 by
# default), and no CLIENT SETINFO (redis-py 5 and later send two on
# connect): a connection, a wait round's above all, costs no round trip
# before its request, and a request that times out was sent. redis-py 4
# speaks RESP2 only and sends nothing.
def _handshake() -> dict:
    if redis_version() < (5, 0, 0):
        return {}
    if importlib.util.find_spec("redis.driver_info") is None:
        return {"protocol": 2, "lib_name": None, "lib_version": None}
    return {"protocol": 2, "driver_info": None}  # lib_name is deprecated from then on


HANDSHAKE = _handshake()


class _Parser(PythonParser):
    """PythonParser that keeps the whole error reply on the exception."""

    def parse_error(self, response):
        err = super().parse_error(response)
        err.fencer_reply = response
        return err


def reply_of(err: BaseException) -> str | None:
    """Return the full error reply behind a redis-py exception, if it is one.

    Exceptions from this package's connections carry it. For those of a
    caller's own redis-py client (token_for), the code is put back from
    redis-py's class, as redis-py 4 strips it: ``NOPERM`` and ``NOAUTH``
    become their own classes, ``ERR`` is dropped from a plain ResponseError.
    """
    raw = getattr(err, "fencer_reply", None)
    if raw is not None:
        return raw
    if not isinstance(err, redis.exceptions.ResponseError) and not isinstance(
        err, redis.exceptions.AuthenticationError
    ):
        return None
    text = str(err)
    stripped = {
        redis.exceptions.NoPermissionError: "NOPERM",
        redis.exceptions.NoScriptError: "NOSCRIPT",
        redis.exceptions.AuthenticationError: "NOAUTH",
        redis.exceptions.ExecAbortError: "EXECABORT",
        redis.exceptions.ReadOnlyError: "READONLY",
    }
    for cls, code in stripped.items():
        if type(err) is cls:
            return f"{code} {text}"
    first = text.split(" ", 1)[0]
    if first.isalpha() and first.isupper() and len(first) > 1:
        return text
    return "ERR " + text


class _TLSConnection(redis.Connection):
    """A Connection that completes a TLS handshake with a given SSLContext."""

    def __init__(self, ssl_context: _ssl.SSLContext, **kw):
        super().__init__(**kw)
        self._ssl_context = ssl_context

    def _connect(self):
        sock = super()._connect()
        try:
            return self._ssl_context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


def tls_refused(err: BaseException) -> _ssl.SSLError | None:
    """Return the TLS error behind err if a retry would meet it again.

    A certificate that did not verify, an alert from the node, a reply that
    is not TLS: yes. A connection that drops during the handshake: no.
    """
    seen = set()
    e = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, _ssl.SSLError) and not isinstance(
            e, (_ssl.SSLEOFError, _ssl.SSLZeroReturnError, _ssl.SSLSyscallError)
        ):
            return e
        e = e.__cause__ or e.__context__
    return None


class Sent(Exception):
    """Marks a network failure after the request may have been sent."""


class Node:
    """One address and its idle connections."""

    def __init__(self, addr: str, *, username, password, ssl_context, request_timeout: float):
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"address {addr!r} is not host:port")
        self.addr = addr
        self.host = host.strip("[]")
        self.port = int(port)
        self._kw = dict(
            host=self.host,
            port=self.port,
            username=username,
            password=password,
            socket_timeout=request_timeout,
            socket_connect_timeout=request_timeout,
            socket_keepalive=True,
            parser_class=_Parser,
            **HANDSHAKE,
        )
        self._ssl_context = ssl_context
        self._mu = threading.Lock()  # guards _idle
        self._idle: list[redis.Connection] = []

    def new_connection(self) -> redis.Connection:
        """Return a new, unconnected connection to the node."""
        if self._ssl_context is not None:
            return _TLSConnection(self._ssl_context, **self._kw)
        return redis.Connection(**self._kw)

    def call(self, timeout: float, *args):
        """Send args on an idle (or new) connection and return the reply.

        The reply must start within timeout. An error reply raises the
        redis-py exception carrying ``fencer_reply``; a network failure after
        the request may have been sent is raised as Sent (from the cause).
        """
        with self._mu:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.new_connection()
        ok = False
        try:
            reply = call(conn, timeout, *args)
            ok = True
            return reply
        except redis.exceptions.ResponseError as e:
            if getattr(e, "fencer_reply", None) is not None and conn._sock is not None:
                ok = True  # an error reply leaves the connection in step
            raise
        finally:
            if ok:
                with self._mu:
                    self._idle.append(conn)
            else:
                conn.disconnect()

    def close(self):
        with self._mu:
            idle, self._idle = self._idle, []
        for c in idle:
            c.disconnect()


def call(conn: redis.Connection, timeout: float, *args):
    """Send args on conn and read the reply, which must start within timeout.

    Connecting, TLS and AUTH included, is bounded by timeout too (and by
    the request timeout). A failure once sending began is raised as Sent.
    """
    if conn._sock is None:
        connect(conn, timeout)
    send(conn, *args)
    return receive(conn, timeout)


def send(conn: redis.Connection, *args) -> None:
    """Send args on conn, which must be connected (redis-py would connect
    it again otherwise). A failure is raised as Sent."""
    if conn._sock is None:
        raise Sent("the connection is closed")
    try:
        conn.send_command(*args)
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as e:
        raise Sent(str(e)) from e


def receive(conn: redis.Connection, timeout: float):
    """Read the reply to what was sent on conn; it must start within
    timeout. A network failure is raised as Sent."""
    try:
        if conn._sock is None:
            raise redis.exceptions.ConnectionError("the connection is closed")
        if not conn.can_read(timeout=timeout):
            raise redis.exceptions.TimeoutError(f"no reply within {timeout:.3f}s")
        return conn.read_response()
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as e:
        if getattr(e, "fencer_reply", None) is not None:
            raise  # an error reply that redis-py files under ConnectionError (NOAUTH)
        raise Sent(str(e)) from e


def connect(conn: redis.Connection, timeout: float) -> None:
    """Connect conn, with the TCP connect, the TLS handshake and the AUTH
    reply each bounded by timeout (at most the request timeout).

    redis-py reads AUTH's reply with the connection's socket_timeout, so it
    is lowered for the connect and put back after, on the socket and on
    the parser's buffer, which keeps its own copy.
    """
    base = conn.socket_timeout
    t = min(timeout, base)
    conn.socket_connect_timeout = t
    conn.socket_timeout = t
    try:
        conn.connect()
    finally:
        conn.socket_timeout = base
        sock = conn._sock
        if sock is not None:
            sock.settimeout(base)
            buf = getattr(conn._parser, "_buffer", None)
            if buf is not None:
                buf.socket_timeout = base


def classify(err: BaseException, addr: str) -> Failure:
    """Sort an exception from one attempt at the node at addr."""
    raw = reply_of(err) if isinstance(err, redis.exceptions.RedisError) else None
    if raw is not None:
        return classify_reply(raw)
    tls = tls_refused(err)
    if tls is not None:
        return Failure(TLSError(f"TLS with {addr} failed: {tls}"))
    if isinstance(err, Sent):
        cause = err.__cause__ or err
        return Failure(
            UncertainError(f"{addr}: {cause!r}: the request may have taken effect", last=cause),
            transient=True,
            uncertain=True,
        )
    return Failure(NoLeaderError(f"{addr}: {err!r}", last=err), transient=True)


def is_refusal(f: Failure) -> bool:
    """Whether a failure is a refusal of the credentials or TLS."""
    return isinstance(f.error, (AuthError, TLSError))
