// Driver for redis-semaphore (npm) with ioredis: Mutex, Semaphore, MultiSemaphore.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { Mutex, Semaphore, MultiSemaphore } from 'redis-semaphore';
import Redis from 'ioredis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, ...(name ? { connectionName: name } : {}) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const key = `fencer-survey-${process.pid}`;

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
const a = connect(), b = connect(), raw = connect('fencer-survey-check');
const lost = (e) => { console.error('FAIL: lock lost', e); process.exit(1); };
try {
  // ---- Mutex: SET key id PX ttl NX; refresh and release are Lua (EVALSHA, EVAL on NOSCRIPT)
  const m1 = new Mutex(a, key, { lockTimeout: 3000, acquireTimeout: 1000, refreshInterval: 500, onLockLost: lost });
  await m1.acquire();
  console.log(`mutex acquired: key=mutex:${key} identifier=${m1.identifier}`);
  check(await raw.get(`mutex:${key}`) === m1.identifier, 'mutex key holds the identifier');
  await sleep(1300); // the library refreshes every 500 ms (expireIfEqual script -> PEXPIRE)
  const pttl = await raw.pttl(`mutex:${key}`);
  check(pttl > 2400, `mutex auto-extended by the library (pttl ${pttl} ms > 2400 after 1.3 s of a 3 s lease)`);
  const m2 = new Mutex(b, key, { lockTimeout: 3000, acquireTimeout: 300, retryInterval: 50, refreshInterval: 0 });
  check(!(await m2.tryAcquire()), 'second Mutex refused by tryAcquire while the first holds it');
  let timedOut = false;
  try { await m2.acquire(); } catch (e) { timedOut = e.name === 'TimeoutError' || /timeout/i.test(e.message); console.log('second acquire():', e.message); }
  check(timedOut, 'second Mutex acquire() times out while the first holds it');
  await m1.release();
  console.log('mutex released');
  check(await raw.exists(`mutex:${key}`) === 0, 'mutex key gone after release');
  check(await m2.tryAcquire(), 'second Mutex acquires after release');
  await m2.release();

  // ---- Semaphore (limit 2): sorted set, acquire/refresh/release are Lua
  const s = [1, 2, 3].map((i) => new Semaphore(i === 3 ? b : a, key, 2, { lockTimeout: 3000, acquireTimeout: 300, retryInterval: 50, refreshInterval: 0 }));
  await s[0].acquire(); await s[1].acquire();
  console.log(`semaphore: 2 of 2 permits taken, key=semaphore:${key} members=${JSON.stringify(await raw.zrange(`semaphore:${key}`, 0, -1))}`);
  check(!(await s[2].tryAcquire()), 'third Semaphore holder refused while 2 of 2 permits are held');
  check(await s[0]._refresh(), 'semaphore permit refreshed (library refresh script)');
  await s[0].release();
  console.log('semaphore: one permit released');
  check(await s[2].tryAcquire(), 'third Semaphore holder acquires after a release');
  await s[1].release(); await s[2].release();
  check(await raw.zcard(`semaphore:${key}`) === 0, 'semaphore empty after all releases');

  // ---- MultiSemaphore (limit 3, 2 permits each)
  const ms1 = new MultiSemaphore(a, key, 3, 2, { lockTimeout: 3000, acquireTimeout: 300, retryInterval: 50, refreshInterval: 0 });
  const ms2 = new MultiSemaphore(b, key, 3, 2, { lockTimeout: 3000, acquireTimeout: 300, retryInterval: 50, refreshInterval: 0 });
  await ms1.acquire();
  console.log(`multisemaphore acquired 2 of 3: members=${JSON.stringify(await raw.zrange(`semaphore:${key}`, 0, -1))}`);
  check(!(await ms2.tryAcquire()), 'second MultiSemaphore (2 more permits) refused while 2 of 3 are held');
  check(await ms1._refresh(), 'multisemaphore permits refreshed');
  await ms1.release();
  check(await ms2.tryAcquire(), 'second MultiSemaphore acquires after release');
  await ms2.release();
  console.log('PASS redis-semaphore');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) c.disconnect();
}
