// Driver for simple-redis-mutex 3.0.0 with node-redis 5: tryLock/lock, fencing
// tokens (INCR), refreshTimeout (GET + PEXPIRE), release script that PUBLISHes,
// a blocked waiter woken by that PUBLISH, a refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { lock, tryLock } from 'simple-redis-mutex';
import { createClient } from 'redis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => createClient({ socket: { host, port: Number(port), reconnectStrategy: false }, ...(name ? { name } : {}) })
  .on('error', (e) => console.error('redis client error:', e.message)).connect();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const name = `fencer-survey-${process.pid}`;
const lockKey = `@simple-redis-mutex:lock-${name}`;

let a, b, raw;
try {
  // raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
  [a, b, raw] = await Promise.all([connect(), connect(), connect('fencer-survey-check')]);
  const [ok1, release1] = await tryLock(a, name, { timeout: 3000 });
  check(ok1, `acquired with tryLock: key=${lockKey} value=${await raw.get(lockKey)} fencingToken=${release1.fencingToken}`);
  await sleep(1000);
  await release1.refreshTimeout();
  const pttl = await raw.pTTL(lockKey);
  check(pttl > 2500, `refreshTimeout extended the lease (pttl ${pttl} ms after 1 s of a 3 s lease)`);

  const [ok2, release2] = await tryLock(b, name, { timeout: 3000 });
  check(!ok2 && release2.fencingToken === -1, 'second acquirer refused by tryLock while the first holds the lock');
  let failed = false;
  try { await lock(b, name, { timeout: 3000, failAfter: 300 }); } catch (e) { failed = true; console.log('second lock():', e.message); }
  check(failed, 'second acquirer lock() gives up after failAfter while the first holds the lock');

  // a blocked waiter is woken by the release's PUBLISH (polling is set far longer than the test)
  const t0 = Date.now();
  const waiting = lock(b, name, { timeout: 3000, pollingInterval: 60000, failAfter: 5000 });
  await sleep(200);
  await release1();
  console.log('first released');
  const release3 = await waiting;
  const waited = Date.now() - t0;
  check(waited < 1500, `blocked waiter acquired ${waited} ms after it started waiting (woken by PUBLISH on release)`);
  check(release3.fencingToken > release1.fencingToken, `fencing token increased: ${release1.fencingToken} -> ${release3.fencingToken}`);
  await release3();
  check(await raw.exists(lockKey) === 0, 'key gone after the waiter released');
  console.log('PASS simple-redis-mutex');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) if (c) await c.close().catch(() => {});
  setTimeout(() => process.exit(), 200).unref();
}
