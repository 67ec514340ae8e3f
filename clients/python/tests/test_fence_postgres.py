"""fencer.fence_postgres against a real PostgreSQL (Go: fencesql's tests)."""

from __future__ import annotations

import threading

import psycopg2
import pytest

from fencecheck import check_history, refusal, want_stale, writers
from fencer.fence_postgres import Table, TokenRangeError, Tokens


def execute(conn, *stmts):
    with conn:
        with conn.cursor() as cur:
            for s in stmts:
                cur.execute(s)


def query(conn, q):
    with conn:
        with conn.cursor() as cur:
            cur.execute(q)
            return cur.fetchall()


def landing_log(conn, table):
    """A table "landed" that a trigger fills with the token of every row of
    table inserted or updated, in landing order: the database's own record."""
    execute(conn,
            "CREATE TABLE landed (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)",
            """CREATE FUNCTION log_landing() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN INSERT INTO landed (token) VALUES (NEW.token); RETURN NEW; END $$""",
            f"CREATE TRIGGER {table}_landed AFTER INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION log_landing()")


def per_thread_connection(dsn, request):
    """A function returning the calling thread's own connection; all are
    closed when the test ends."""
    local, opened = threading.local(), []

    def conn():
        if not hasattr(local, "c"):
            local.c = psycopg2.connect(dsn)
            opened.append(local.c)
        return local.c

    request.addfinalizer(lambda: [c.close() for c in opened])
    return conn


def test_table_write(pg):
    execute(pg, "CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT, author TEXT)")
    docs = Table("docs", "id", "token", "body", "author")
    steps = [("a", 5, "first", 0), ("a", 5, "first, edited", 0), ("a", 4, "late", 5), ("b", 1, "other row", 0),
             ("a", 9, "newer holder", 0), ("a", 5, "old holder again", 9)]
    for key, token, body, stale_over in steps:
        if stale_over == 0:
            docs.write(pg, key, token, body, f"w{token}")
            continue
        with pytest.raises(Exception) as e:
            docs.write(pg, key, token, body, f"w{token}")
        want_stale(e, key, token, stale_over)
    got = {r[0]: r[1:] for r in query(pg, "SELECT id, token, body, author FROM docs")}
    assert got == {"a": (9, "newer holder", "w9"), "b": (1, "other row", "w1")}
    with pytest.raises(TokenRangeError):
        docs.write(pg, "a", 1 << 63, "x", "y")
    with pytest.raises(ValueError):
        docs.write(pg, "a", 10, "too few values")


def test_table_write_in_transaction(pg):
    """A refused write inside a transaction (a cursor) leaves it usable, and
    its other writes commit."""
    execute(pg, "CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)", "CREATE TABLE notes (note TEXT)")
    docs = Table("docs", "id", "token", "body")
    docs.write(pg, "a", 7, "seven")
    with pg:
        with pg.cursor() as cur:
            with pytest.raises(Exception) as e:
                docs.write(cur, "a", 6, "six")
            want_stale(e, "a", 6, 7)
            cur.execute("INSERT INTO notes (note) VALUES ('refused 6')")
    assert query(pg, "SELECT body FROM docs WHERE id = 'a'") == [("seven",)]
    assert query(pg, "SELECT note FROM notes") == [("refused 6",)]
    # A connection with a transaction open is refused, not committed behind the caller's back.
    with pg.cursor() as cur:
        cur.execute("SELECT 1")
    with pytest.raises(ValueError):
        docs.write(pg, "a", 8, "eight")
    pg.rollback()


def test_tokens_do(pg):
    tokens = Tokens("fence_tokens")
    tokens.create_table(pg)
    tokens.create_table(pg)  # again: IF NOT EXISTS
    execute(pg, "CREATE TABLE ledger (account TEXT, amount BIGINT, token BIGINT)",
            "CREATE TABLE balances (account TEXT PRIMARY KEY, balance BIGINT)", "INSERT INTO balances VALUES ('acct', 0)")

    class Boom(Exception):
        pass

    def deposit(token, amount, fail=False):
        def write(cur):
            cur.execute("INSERT INTO ledger VALUES ('acct', %s, %s)", (amount, token))
            cur.execute("UPDATE balances SET balance = balance + %s", (amount,))
            if fail:
                raise Boom("payment service down")
            return "done"

        return tokens.do(pg, "account/acct", token, write)

    assert tokens.highest(pg, "account/acct") is None
    assert deposit(10, 100) == "done"
    deposit(12, 5)
    with pytest.raises(Exception) as e:
        deposit(11, 1000)
    want_stale(e, "account/acct", 11, 12)
    with pytest.raises(Boom):
        deposit(13, 7, fail=True)
    # The failed write with 13 was rolled back with its admission, so 12 is
    # still the highest and its holder may go on.
    assert tokens.highest(pg, "account/acct") == 12
    deposit(12, 1)
    assert query(pg, "SELECT balance FROM balances") == [(106,)]
    assert query(pg, "SELECT count(*) FROM ledger") == [(3,)]


def test_qualified_name(pg):
    execute(pg, 'CREATE SCHEMA app', 'CREATE TABLE app."Docs" (id INT PRIMARY KEY, tok BIGINT NOT NULL, body TEXT)')
    docs = Table("app.Docs", "id", "tok", "body")
    docs.write(pg, 1, 3, "x")
    with pytest.raises(Exception) as e:
        docs.write(pg, 1, 2, "y")
    want_stale(e, "1", 2, 3)


def test_table_concurrent_interleaved_tokens(pg, request):
    holders, writes = 8, 25
    execute(pg, "CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)")
    landing_log(pg, "docs")
    docs = Table("docs", "id", "token", "body")
    conn = per_thread_connection(pg.dsn, request)

    refused = writers(holders, writes, lambda token, i: refusal(
        token, lambda: docs.write(conn(), "doc", token, f"holder {token} write {i}")))
    check_history(refused, holders, writes, [r[0] for r in query(pg, "SELECT token FROM landed ORDER BY seq")])
    tok, body = query(pg, "SELECT token, body FROM docs WHERE id = 'doc'")[0]
    assert tok == holders and body.startswith(f"holder {holders} ")


def test_tokens_concurrent_interleaved_tokens(pg, request):
    holders, writes = 8, 25
    tokens = Tokens()
    tokens.create_table(pg)
    execute(pg, "CREATE TABLE events (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)",
            "CREATE TABLE summary (id INT PRIMARY KEY, last_token BIGINT, count BIGINT)", "INSERT INTO summary VALUES (1, 0, 0)")
    conn = per_thread_connection(pg.dsn, request)

    def write(token, i):
        def guarded(cur):
            cur.execute("INSERT INTO events (token) VALUES (%s)", (token,))
            cur.execute("UPDATE summary SET last_token = %s, count = count + 1", (token,))

        return refusal(token, lambda: tokens.do(conn(), "stream", token, guarded))

    refused = writers(holders, writes, write)
    landed = [r[0] for r in query(pg, "SELECT token FROM events ORDER BY seq")]
    check_history(refused, holders, writes, landed)
    assert query(pg, "SELECT last_token, count FROM summary") == [(holders, len(landed))]
