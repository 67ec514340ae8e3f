"""Fenced writes to PostgreSQL with psycopg2 (Go: fence/fencesql).

Two ways, as in fencesql:

- Table: each row carries its own token column; a write is one statement,
  ``INSERT ... ON CONFLICT (key) DO UPDATE SET ... WHERE table.token <=
  excluded.token``, which inserts the row, updates it if the token allows,
  or changes nothing (then StaleTokenError).
- Tokens: a table of the highest admitted token per resource, admitted
  inside the caller's transaction before the writes it guards; its row
  stays locked until the transaction ends, so writers of the same resource
  take turns, in token order.

The tables are fencesql's (the tokens table has columns ``resource`` TEXT
and ``token`` BIGINT), so Go and Python writers fence each other.

Where a function takes a *target*: a psycopg2 connection runs the write in
a transaction of its own and commits it (the connection must have no
transaction open), like Go's ``*sql.DB``; a cursor runs it inside that
cursor's current transaction and commits nothing, like a ``*sql.Tx``
(a refused write leaves the transaction usable).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import psycopg2
import psycopg2.extensions as _ext
from psycopg2 import sql

from .fence import StaleTokenError

__all__ = ["Table", "Tokens", "TokenRangeError", "StaleTokenError"]

MAX_BIGINT = (1 << 63) - 1


class TokenRangeError(ValueError):
    """A token above 2**63-1 cannot be stored in a BIGINT column."""


def _ident(name: str) -> sql.Identifier:
    """A possibly schema-qualified name, quoted part by part."""
    return sql.Identifier(*name.split("."))


def _bigint(token: int) -> int:
    if isinstance(token, bool) or not isinstance(token, int) or token < 0:
        raise ValueError(f"token {token!r} is not a non-negative int")
    if token > MAX_BIGINT:
        raise TokenRangeError(f"token {token} does not fit a BIGINT")
    return token


def _upsert(table: str, key: str, token: str, cols) -> sql.Composed:
    allc = [key, token, *cols]
    return sql.SQL(
        "INSERT INTO {t} ({names}) VALUES ({marks}) ON CONFLICT ({k}) DO UPDATE SET {sets} WHERE {t}.{tok} <= excluded.{tok}"
    ).format(
        t=_ident(table),
        names=sql.SQL(", ").join(sql.Identifier(c) for c in allc),
        marks=sql.SQL(", ").join(sql.Placeholder() for _ in allc),
        k=sql.Identifier(key),
        sets=sql.SQL(", ").join(sql.SQL("{c} = excluded.{c}").format(c=sql.Identifier(c)) for c in allc[1:]),
        tok=sql.Identifier(token),
    )


def _in_transaction(target, fn: Callable[[Any], Any]):
    """Run fn(cursor) on a cursor target, or in a transaction of its own on a connection."""
    if isinstance(target, _ext.connection):
        if target.autocommit:
            with target.cursor() as cur:
                return fn(cur)
        if target.get_transaction_status() != _ext.TRANSACTION_STATUS_IDLE:
            raise ValueError(
                "the connection has a transaction open: pass a cursor to write inside it, or commit it first"
            )
        with target:  # commits on success, rolls back on an exception
            with target.cursor() as cur:
                return fn(cur)
    return fn(target)


def _fenced_write(cur, up, sel, resource: str, key, token: int, values) -> None:
    tok = _bigint(token)
    cur.execute(up, [key, tok, *values])
    if cur.rowcount > 0:
        return
    cur.execute(sel, [key])
    row = cur.fetchone()
    if row is None:
        raise RuntimeError(f"write with token {token} to {resource!r} was refused, and no token refused it")
    raise StaleTokenError(resource, token, int(row[0]))


class Table:
    """A table whose rows each carry their own fencing token.

    A key column (its primary key, or another unique column), a BIGINT
    token column, and the data columns that write() sets. It does not create
    the table.
    """

    def __init__(self, name: str, key_column: str, token_column: str, *columns: str):
        for n in (name, key_column, token_column, *columns):
            if not n:
                raise ValueError("empty table or column name")
        self.name = name
        self.columns = tuple(columns)
        self._up = _upsert(name, key_column, token_column, columns)
        self._sel = sql.SQL("SELECT {tok} FROM {t} WHERE {k} = %s").format(
            tok=sql.Identifier(token_column), t=_ident(name), k=sql.Identifier(key_column)
        )

    def write(self, target, key, token: int, *values) -> None:
        """Insert the row with key, or update it if its token is at most token.

        values go to the data columns in the order the Table named them.
        If the row holds a higher token, nothing changes and StaleTokenError
        is raised, its resource the key as text.
        """
        if len(values) != len(self.columns):
            raise ValueError(f"{len(values)} values for {len(self.columns)} columns of {self.name}")
        _in_transaction(target, lambda cur: _fenced_write(cur, self._up, self._sel, str(key), key, token, values))


class Tokens:
    """A table of the highest admitted token of each resource, for writes a
    single row cannot carry: several rows or tables, deletions, anything a
    transaction can do. Columns: resource (TEXT, primary key), token (BIGINT).
    """

    def __init__(self, name: str = "fence_tokens"):
        if not name:
            raise ValueError("empty table name")
        self.name = name
        self._up = _upsert(name, "resource", "token", ())
        self._sel = sql.SQL('SELECT "token" FROM {t} WHERE "resource" = %s').format(t=_ident(name))
        self._ddl = sql.SQL('CREATE TABLE IF NOT EXISTS {t} ("resource" TEXT PRIMARY KEY, "token" BIGINT NOT NULL)').format(
            t=_ident(name)
        )

    def create_table(self, target) -> None:
        """Create the tokens table if it does not exist."""
        _in_transaction(target, lambda cur: cur.execute(self._ddl))

    def admit(self, cursor, resource: str, token: int) -> None:
        """Record token as resource's highest, inside the cursor's transaction,
        if it is at least the highest recorded; else raise StaleTokenError, and
        the caller must roll back. Admit before the writes it guards."""
        _fenced_write(cursor, self._up, self._sel, resource, resource, token, ())

    def do(self, conn, resource: str, token: int, write: Callable[[Any], Any]):
        """Run write(cursor) in a transaction that first admits token for
        resource, and commit it if write returns; return what write returned.

        A stale token (StaleTokenError), an exception from write or a failed
        commit rolls everything back and propagates. conn must have no
        transaction open; an autocommit connection is switched off
        autocommit for the transaction.
        """
        if not isinstance(conn, _ext.connection):
            raise TypeError("Tokens.do needs a psycopg2 connection")
        restore = conn.autocommit
        if restore:
            conn.autocommit = False
        try:
            def run(cur):
                self.admit(cur, resource, token)
                return write(cur)

            return _in_transaction(conn, run)
        finally:
            if restore:
                conn.autocommit = True

    def highest(self, target, resource: str) -> Optional[int]:
        """Return the highest token recorded for resource, or None."""

        def read(cur):
            cur.execute(self._sel, [resource])
            row = cur.fetchone()
            return None if row is None else int(row[0])

        return _in_transaction(target, read)
