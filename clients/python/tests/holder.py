"""The first holder of the Kleppmann run (test_kleppmann.py), as a process
of its own so that the test can pause it with SIGSTOP.

Usage: holder.py FENCER_ADDR LOCK_NAME REDIS_PORT PG_DSN [threaded|asyncio]

It takes the lock with a short TTL (auto-renewed), opens its connections to
the stores, prints "token N", and waits for a line on stdin: the test pauses
it meanwhile, past its TTL. Then it writes with its token, as a paused
process that does not know it was paused would, and prints what each store
said: "<store> admitted" or "<store> stale <highest>".
"""

import asyncio
import sys

import psycopg2
import redis

import fencer
from fencer.fence_postgres import Table
from fencer.fence_redis import Store


def main():
    addr, name, redis_port, dsn = sys.argv[1:5]
    if sys.argv[5:] == ["asyncio"]:
        asyncio.run(main_asyncio(addr, name, redis_port, dsn))
        return
    client = fencer.Client([addr])
    lease = client.lock(name, ttl=1.0).acquire()
    write_late(lease, redis_port, dsn)
    client.close()


async def main_asyncio(addr, name, redis_port, dsn):
    import fencer.asyncio

    client = fencer.asyncio.Client([addr])
    lease = await client.lock(name, ttl=1.0).acquire()
    # The stores' clients are blocking: run them off the event loop, whose
    # renewal task then runs on until the pause, as a real program's would.
    await asyncio.to_thread(write_late, lease, redis_port, dsn)
    await client.close()


def write_late(lease, redis_port, dsn):
    pg = psycopg2.connect(dsn)
    store = Store(redis.Redis(port=int(redis_port), socket_timeout=10))
    docs = Table("docs", "id", "token", "body")
    print(f"token {lease.token}", flush=True)
    sys.stdin.readline()
    for label, write in (
        ("postgres", lambda: docs.write(pg, "doc", lease.token, "the first holder's late write")),
        ("redis", lambda: store.set("doc", lease.token, "the first holder's late write")),
    ):
        try:
            write()
            print(f"{label} admitted", flush=True)
        except fencer.StaleTokenError as e:
            print(f"{label} stale {e.highest}", flush=True)
    pg.close()


if __name__ == "__main__":
    main()
