"""Runs one Python lock library, unchanged, against the Redis or fencer
addresses in LOCK_ADDRS (host:port, comma-separated), and checks what the
library itself answers.

    python driver.py LIBRARY basic   the library's API and mutual exclusion
    python driver.py LIBRARY hold    a lock held across a leader kill

basic: A takes the lock without blocking; B is refused while A holds it; A
extends it (where the library can) and still owns it; A releases it; B then
gets it and releases it. Then WORKERS workers, each with its own client,
take the lock ROUNDS times each through the library's blocking acquire, and
no two are ever inside at once.

hold: A takes the lock (a 30 s lease) and B starts trying every 200 ms
(errors while the cluster elects a new leader are counted and tried again,
as a caller's next try would). The driver prints "held" and waits for a
line on stdin (the test kills the leader meanwhile). Then A still owns the
lock and extends it, B has not got it and still does not 1 s later; A
releases it and B gets it within 10 s.

Each step that behaved prints "ok: ..."; the last line is PASS. Any other
outcome raises (exit status 1).

The Redlock-style libraries (pottery, aioredlock, redlock-py) are given
every address; the others the first one.
"""

import asyncio
import os
import sys
import time
import uuid

ADDRS = [a.rsplit(":", 1) for a in os.environ["LOCK_ADDRS"].split(",")]
ADDRS = [(h, int(p)) for h, p in ADDRS]
KEY = os.environ.get("LOCK_KEY", "pylibs") + ":" + uuid.uuid4().hex[:8]
# SOCKET_TIMEOUT outlasts an election: a follower holds a command until a
# new leader answers it.
SOCKET_TIMEOUT = 15
# PROTOCOL is the RESP version redis-py's clients speak: 2 (the default)
# or 3 (HELLO 3).
PROTOCOL = int(os.environ.get("LOCK_PROTOCOL", "2"))
WORKERS = 3
ROUNDS = 4


def sync_clients():
    import redis

    return [redis.Redis(host=h, port=p, socket_timeout=SOCKET_TIMEOUT, protocol=PROTOCOL) for h, p in ADDRS]


def async_clients():
    import redis.asyncio

    return [redis.asyncio.Redis(host=h, port=p, socket_timeout=SOCKET_TIMEOUT, protocol=PROTOCOL) for h, p in ADDRS]


class Adapter:
    """One holder: a library instance with its own client(s).

    try_acquire takes the lock without blocking; acquire blocks (the
    library's own way) up to timeout seconds; extend returns None where the
    library has no extend; owned returns None where the library cannot
    tell."""

    raises_with_a_master_down = False

    async def close(self):
        pass


class SyncAdapter(Adapter):
    """Runs a synchronous library's calls in threads, one holder each."""

    async def try_acquire(self, ttl):
        return await asyncio.to_thread(self.s_try_acquire, ttl)

    async def acquire(self, ttl, timeout):
        return await asyncio.to_thread(self.s_acquire, ttl, timeout)

    async def extend(self, ttl):
        return await asyncio.to_thread(self.s_extend, ttl)

    async def owned(self):
        return await asyncio.to_thread(self.s_owned)

    async def release(self):
        return await asyncio.to_thread(self.s_release)


class RedisPy(SyncAdapter):
    def __init__(self):
        self.r = sync_clients()[0]
        self.lock = None

    def make(self, ttl):
        # thread_local=False: the calls of one holder run in several threads.
        self.lock = self.r.lock(KEY, timeout=ttl, thread_local=False)

    def s_try_acquire(self, ttl):
        self.make(ttl)
        return self.lock.acquire(blocking=False)

    def s_acquire(self, ttl, timeout):
        self.make(ttl)
        return self.lock.acquire(blocking=True, blocking_timeout=timeout)

    def s_extend(self, ttl):
        if not self.lock.extend(ttl):
            return False
        return self.lock.reacquire()

    def s_owned(self):
        return self.lock.owned()

    def s_release(self):
        self.lock.release()


class RedisPyAsync(Adapter):
    def __init__(self):
        self.r = async_clients()[0]
        self.lock = None

    async def try_acquire(self, ttl):
        self.lock = self.r.lock(KEY, timeout=ttl)
        return await self.lock.acquire(blocking=False)

    async def acquire(self, ttl, timeout):
        self.lock = self.r.lock(KEY, timeout=ttl)
        return await self.lock.acquire(blocking=True, blocking_timeout=timeout)

    async def extend(self, ttl):
        if not await self.lock.extend(ttl):
            return False
        return await self.lock.reacquire()

    async def owned(self):
        return await self.lock.owned()

    async def release(self):
        await self.lock.release()

    async def close(self):
        await self.r.aclose()


class Pottery(SyncAdapter):
    def __init__(self):
        self.masters = sync_clients()
        self.lock = None

    def make(self, ttl):
        from pottery import Redlock

        self.lock = Redlock(key=KEY, masters=set(self.masters), auto_release_time=ttl)

    def s_try_acquire(self, ttl):
        self.make(ttl)
        return self.lock.acquire(blocking=False)

    def s_acquire(self, ttl, timeout):
        self.make(ttl)
        return self.lock.acquire(blocking=True, timeout=timeout)

    def s_extend(self, ttl):
        self.lock.extend()  # raises if not extended
        return self.lock.locked() > 0

    def s_owned(self):
        return self.lock.locked() > 0

    def s_release(self):
        self.lock.release()


class PotteryAsync(Adapter):
    def __init__(self):
        self.masters = async_clients()
        self.lock = None

    def make(self, ttl):
        from pottery import AIORedlock

        self.lock = AIORedlock(key=KEY, masters=set(self.masters), auto_release_time=ttl)

    async def try_acquire(self, ttl):
        self.make(ttl)
        return await self.lock.acquire(blocking=False)

    async def acquire(self, ttl, timeout):
        self.make(ttl)
        return await self.lock.acquire(blocking=True, timeout=timeout)

    async def extend(self, ttl):
        await self.lock.extend()
        return await self.lock.locked() > 0

    async def owned(self):
        return await self.lock.locked() > 0

    async def release(self):
        await self.lock.release()

    async def close(self):
        for m in self.masters:
            await m.aclose()


class Aioredlock(Adapter):
    def __init__(self):
        from aioredlock import Aioredlock as Manager

        conns = [{"host": h, "port": p} for h, p in ADDRS]
        # One try per call: the driver does its own waiting.
        self.manager = Manager(redis_connections=conns, retry_count=1)
        self.lock = None

    async def try_acquire(self, ttl):
        from aioredlock import LockError

        try:
            self.lock = await self.manager.lock(KEY, lock_timeout=ttl)
        except LockError:
            return False
        return True

    async def acquire(self, ttl, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.try_acquire(ttl):
                return True
            await asyncio.sleep(0.05)
        return False

    async def extend(self, ttl):
        await self.manager.extend(self.lock, lock_timeout=ttl)
        return self.lock.valid

    async def owned(self):
        return await self.manager.is_locked(self.lock)

    async def release(self):
        await self.manager.unlock(self.lock)

    async def close(self):
        await self.manager.destroy()


class PythonRedisLock(SyncAdapter):
    def __init__(self):
        self.r = sync_clients()[0]
        self.lock = None

    def make(self, ttl):
        import redis_lock

        self.lock = redis_lock.Lock(self.r, KEY, expire=ttl)

    def s_try_acquire(self, ttl):
        self.make(ttl)
        return self.lock.acquire(blocking=False)

    def s_acquire(self, ttl, timeout):
        self.make(ttl)
        # Blocks on BLPOP of the lock's signal list, woken by the release;
        # its timeout may not exceed the lease.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.lock.acquire(blocking=True, timeout=min(ttl, timeout)):
                return True
        return False

    def s_extend(self, ttl):
        self.lock.extend(expire=ttl)  # raises if not held
        return self.s_owned()

    def s_owned(self):
        return self.lock.get_owner_id() == self.lock.id

    def s_release(self):
        self.lock.release()


class RedlockPy(SyncAdapter):
    # redlock-py's lock() raises MultipleRedlockException when any master
    # answered with an error, even when a quorum granted the lock, and
    # leaves the lock set on that quorum until its TTL: with one of several
    # masters down, no lock() ever succeeds (on Redis as on fencer).
    raises_with_a_master_down = True

    def __init__(self):
        from redlock import Redlock

        conns = [{"host": h, "port": p, "socket_timeout": SOCKET_TIMEOUT, "protocol": PROTOCOL} for h, p in ADDRS]
        self.dlm = Redlock(conns, retry_count=1)
        self.lock = None

    def s_try_acquire(self, ttl):
        self.lock = self.dlm.lock(KEY, int(ttl * 1000))
        return bool(self.lock)

    def s_acquire(self, ttl, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.s_try_acquire(ttl):
                return True
            time.sleep(0.05)
        return False

    def s_extend(self, ttl):
        return None  # redlock-py has no extend

    def s_owned(self):
        return None  # nor a way to ask

    def s_release(self):
        self.dlm.unlock(self.lock)


class Sherlock(SyncAdapter):
    def __init__(self):
        self.r = sync_clients()[0]
        self.lock = None

    def make(self, ttl, timeout=0):
        import sherlock

        self.lock = sherlock.RedisLock(KEY, client=self.r, expire=ttl, timeout=timeout, retry_interval=0.05)

    def s_try_acquire(self, ttl):
        self.make(ttl)
        return self.lock.acquire(blocking=False)

    def s_acquire(self, ttl, timeout):
        import sherlock

        self.make(ttl, timeout)
        try:
            return self.lock.acquire(blocking=True)
        except sherlock.LockTimeoutException:
            return False

    def s_extend(self, ttl):
        return self.lock.renew()

    def s_owned(self):
        return None  # locked() says whether anyone holds it

    def s_release(self):
        self.lock.release()


class Tooz(SyncAdapter):
    def __init__(self):
        self.coord = None
        self.lock = None

    def make(self, ttl):
        from tooz import coordination

        if self.coord is None:
            h, p = ADDRS[0]
            url = f"redis://{h}:{p}?timeout={SOCKET_TIMEOUT}&lock_timeout={int(ttl)}"
            self.coord = coordination.get_coordinator(url, uuid.uuid4().hex.encode())
            self.coord.start(start_heart=False)
        self.lock = self.coord.get_lock(KEY.encode())

    def s_try_acquire(self, ttl):
        self.make(ttl)
        return self.lock.acquire(blocking=False)

    def s_acquire(self, ttl, timeout):
        self.make(ttl)
        return self.lock.acquire(blocking=True, timeout=timeout)

    def s_extend(self, ttl):
        # heartbeat resets the lock's lease to lock_timeout.
        return self.lock.heartbeat() and self.lock.is_still_owner()

    def s_owned(self):
        return self.lock.is_still_owner()

    def s_release(self):
        if not self.lock.release():
            raise AssertionError("tooz: release answered False")

    async def close(self):
        if self.coord is not None:
            await asyncio.to_thread(self.coord.stop)


LIBRARIES = {
    "redis-py": RedisPy,
    "redis-py-asyncio": RedisPyAsync,
    "pottery-redlock": Pottery,
    "pottery-aioredlock": PotteryAsync,
    "aioredlock": Aioredlock,
    "python-redis-lock": PythonRedisLock,
    "redlock-py": RedlockPy,
    "sherlock": Sherlock,
    "tooz": Tooz,
}


def ok(step):
    print("ok: " + step, flush=True)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def basic(make):
    a, b = make(), make()
    check(await a.try_acquire(10) is True, "A's acquire of a free lock was not granted")
    ok("A acquired")
    check(await b.try_acquire(10) is False, "B was granted the lock A holds")
    ok("B refused while A holds it")
    ext = await a.extend(20)
    check(ext in (True, None), f"A's extend answered {ext!r}")
    owned = await a.owned()
    check(owned in (True, None), f"A does not own its lock after the extend ({owned!r})")
    ok(f"A extended ({ext}) and owns it ({owned})")
    await a.release()
    ok("A released")
    owned = await a.owned()
    check(owned in (False, None), f"A still owns the lock after its release ({owned!r})")
    check(await b.try_acquire(10) is True, "B did not get the lock A released")
    ok("B acquired after A's release")
    await b.release()
    ok("B released")
    await a.close()
    await b.close()

    inside = 0
    sections = 0

    async def worker(i):
        nonlocal inside, sections
        h = make()
        try:
            for _ in range(ROUNDS):
                check(await h.acquire(10, 30) is True, f"worker {i} waited 30 s for the lock")
                inside += 1
                check(inside == 1, f"worker {i} entered while another worker was inside")
                sections += 1
                await asyncio.sleep(0.01)
                inside -= 1
                await h.release()
        finally:
            await h.close()

    await asyncio.gather(*(worker(i) for i in range(WORKERS)))
    check(sections == WORKERS * ROUNDS, f"{sections} critical sections, want {WORKERS * ROUNDS}")
    ok(f"{WORKERS} workers x {ROUNDS} rounds, never two inside")


async def hold(make):
    a, b = make(), make()
    check(await a.try_acquire(30) is True, "A's acquire of a free lock was not granted")
    got = asyncio.Event()
    errors = []
    stop = False

    async def waiter():
        while not stop:
            try:
                if await b.try_acquire(10):
                    got.set()
                    return
            except Exception as e:  # a command in flight across the kill
                errors.append(f"{type(e).__name__}: {e}")
            await asyncio.sleep(0.2)

    task = asyncio.create_task(waiter())
    print("held", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    check(line.strip() == "killed", f"stdin said {line!r}, want 'killed'")
    check(not got.is_set(), "B got the lock A holds, across the leader kill")
    owned = await a.owned()
    check(owned in (True, None), f"A does not own its lock after the leader kill ({owned!r})")
    ext = await a.extend(30)
    check(ext in (True, None), f"A's extend after the leader kill answered {ext!r}")
    ok(f"A still owns its lock after the kill ({owned}) and extended it ({ext})")
    await asyncio.sleep(1)
    check(not got.is_set(), "B got the lock A holds, after the leader kill")
    ok(f"B still refused ({len(errors)} errors during the election: {errors[:3]})")
    await a.release()
    before = len(errors)
    try:
        await asyncio.wait_for(got.wait(), 10)
    except asyncio.TimeoutError:
        stop = True
        await task
        after = errors[before:]
        if not (make.raises_with_a_master_down and len(ADDRS) > 1):
            raise AssertionError(f"B did not get the lock within 10 s of A's release (errors: {after[:3]})")
        # The library's own outcome with a master down (see its adapter).
        check(any(e.startswith("MultipleRedlockException") for e in after),
              f"B did not get the lock, and its errors were not MultipleRedlockException: {after[:3]}")
        ok(f"B's lock() raised MultipleRedlockException with a master down ({len(after)} errors in 10 s): never acquired")
        await a.close()
        await b.close()
        return
    await task
    ok("B acquired after A's release")
    await b.release()
    await a.close()
    await b.close()


async def main():
    lib, mode = sys.argv[1], sys.argv[2]
    make = LIBRARIES[lib]
    await {"basic": basic, "hold": hold}[mode](make)
    print("PASS", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
