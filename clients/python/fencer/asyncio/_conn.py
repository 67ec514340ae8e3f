"""Connections to one node, on redis-py's redis.asyncio Connection.

As fencer._conn, whose parser, error sorting and Sent marker it shares:
every error reply is kept whole on the exception (``fencer_reply``), and a
failure once a request may have been sent is raised as Sent. Deadlines are
asyncio's, around the whole exchange (connect, TLS, AUTH, send, reply);
redis-py's own socket timeout is off.
"""

from __future__ import annotations

import asyncio
import sys

import redis
import redis.asyncio
from redis._parsers import _AsyncRESP2Parser

from .._conn import HANDSHAKE, Sent

if sys.version_info >= (3, 11):

    async def within(aw, timeout: float):
        """Await aw for at most timeout seconds (asyncio.TimeoutError after)."""
        async with asyncio.timeout(timeout):  # novermin: Python 3.11 and later only
            return await aw

else:  # asyncio.timeout is new in 3.11; wait_for runs aw in a task of its own

    async def within(aw, timeout: float):
        """Await aw for at most timeout seconds (asyncio.TimeoutError after)."""
        return await asyncio.wait_for(aw, timeout)


class _Parser(_AsyncRESP2Parser):
    """The RESP2 parser, keeping the whole error reply on the exception."""

    def parse_error(self, response):
        err = super().parse_error(response)
        err.fencer_reply = response
        return err


class _Connection(redis.asyncio.Connection):
    """A Connection that completes a TLS handshake with a given SSLContext
    (redis.asyncio's SSLConnection builds its own from file names)."""

    def __init__(self, ssl_context, **kw):
        super().__init__(**kw)
        self._ssl_context = ssl_context

    def _connection_arguments(self):
        kw = dict(super()._connection_arguments())
        if self._ssl_context is not None:
            kw["ssl"] = self._ssl_context
            kw["server_hostname"] = self.host
        return kw


def abort(conn: redis.asyncio.Connection) -> None:
    """Close conn at once, without awaiting: a connection whose exchange was
    cut short (a timeout, a cancellation) is out of step and never reused,
    and closing it must not need the task that is being cancelled."""
    w = getattr(conn, "_writer", None)
    if w is not None:
        try:
            w.close()
        except Exception:  # noqa: BLE001 - closing a broken transport
            pass
    conn._reader = None
    conn._writer = None
    try:
        conn._parser.on_disconnect()
    except Exception:  # noqa: BLE001
        pass


class Node:
    """One address and its idle connections (used by one event loop)."""

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
            socket_timeout=None,  # the exchange's deadline bounds every read
            socket_connect_timeout=request_timeout,
            socket_keepalive=True,
            parser_class=_Parser,
            **HANDSHAKE,
        )
        self._ssl_context = ssl_context
        self._idle: list = []
        #: Every connection made and not closed yet, idle or in use.
        self.open: set = set()

    def new_connection(self) -> redis.asyncio.Connection:
        """Return a new, unconnected connection to the node."""
        conn = _Connection(self._ssl_context, **self._kw)
        self.open.add(conn)
        return conn

    def discard(self, conn) -> None:
        abort(conn)
        self.open.discard(conn)

    async def call(self, timeout: float, *args):
        """Send args on an idle (or new) connection and return the reply,
        all within timeout. An error reply raises the redis-py exception
        carrying ``fencer_reply``; a failure after the request may have
        been sent is raised as Sent. Cancelled, the connection is closed."""
        conn = self._idle.pop() if self._idle else self.new_connection()
        ok = False
        try:
            reply = await call(conn, timeout, *args)
            ok = True
            return reply
        except redis.exceptions.ResponseError as e:
            if getattr(e, "fencer_reply", None) is not None and conn.is_connected:
                ok = True  # an error reply leaves the connection in step
            raise
        finally:
            if ok:
                self._idle.append(conn)
            else:
                self.discard(conn)

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for c in idle:
            self.discard(c)


async def call(conn, timeout: float, *args):
    """Connect conn if need be, send args and read the reply, all within
    timeout. A failure once sending began is raised as Sent."""
    sending = False

    async def exchange():
        nonlocal sending
        if not conn.is_connected:
            await conn.connect()
        sending = True
        await conn.send_command(*args)
        return await conn.read_response()

    try:
        return await within(exchange(), timeout)
    except asyncio.TimeoutError as e:
        if sending:
            raise Sent(f"no reply within {timeout:.3f}s") from e
        raise redis.exceptions.TimeoutError(f"no connection within {timeout:.3f}s") from e
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as e:
        if getattr(e, "fencer_reply", None) is not None:
            raise  # an error reply that redis-py files under ConnectionError (NOAUTH)
        if sending:
            raise Sent(str(e)) from e
        raise
