// Driver for @redis-kit/lock 0.1.0-3 (Redlock over node-redis 5): acquire,
// extend, auto-extension via withLock, multi-key lock, refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { Redlock } from '@redis-kit/lock';
import { createClient } from 'redis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => createClient({ socket: { host, port: Number(port), reconnectStrategy: false }, ...(name ? { name } : {}) })
  .on('error', (e) => console.error('redis client error:', e.message)).connect();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const key = `fencer-survey-${process.pid}`;

let a, b, raw;
try {
  // raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
  [a, b, raw] = await Promise.all([connect(), connect(), connect('fencer-survey-check')]);
  const rlA = new Redlock([a], { maxRetryAttempts: 0 });
  const rlB = new Redlock([b], { maxRetryAttempts: 2, retryDelayMs: 100, retryJitterMs: 10 });

  const l1 = await rlA.acquire(key, 2000);
  check(l1 && l1.isValid, `acquired: key=${key} token=${await raw.get(key)} expires ${l1.expirationTime.toISOString()}`);
  check(await l1.extend(6000), 'extend(6000) returned true');
  const pttl = await raw.pTTL(key);
  check(pttl > 5000, `extended (pttl ${pttl})`);
  check(await rlB.acquire(key, 2000) === null, 'second acquirer refused (acquire returned null after its retries) while the first holds the lock');
  check(await l1.release(), 'released');
  check(await raw.exists(key) === 0, 'key gone after release');
  console.log(`a second release() returns ${await l1.release()} (the library treats it as already done; nothing is sent)`);
  const l2 = await rlB.acquire(key, 2000);
  check(l2 !== null, 'second acquirer acquires after release');
  await l2.release();

  // multi-key, all or nothing
  const m = await rlA.acquire([`${key}:1`, `${key}:2`], 3000);
  check(m !== null, 'multi-key lock acquired');
  check(await rlB.acquire([`${key}:2`, `${key}:3`], 3000) === null, 'overlapping multi-key acquire refused');
  check(await raw.exists(`${key}:3`) === 0, 'refused multi-key acquire left no key behind');
  await m.release();

  // withLock: automatic extension
  let pttlInside = 0;
  await rlA.withLock(key, 1000, async () => {
    await sleep(1500);
    pttlInside = await raw.pTTL(key);
    check(await rlB.acquire(key, 1000) === null, 'second acquirer refused inside withLock');
  }, { extensionThresholdMs: 500 });
  check(pttlInside > 0, `withLock kept the 1000 ms lock alive for 1.5 s by auto-extension (pttl ${pttlInside})`);
  check(await raw.exists(key) === 0, 'withLock released the lock');
  console.log('PASS @redis-kit/lock');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) if (c) await c.close().catch(() => {});
}
