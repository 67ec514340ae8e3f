// Driver for @microfleet/ioredis-lock 6.0.1 (ioredis): acquire (SET NX PX),
// extend (pexpireifequal script), release (delifequal script), refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { createLock, LockAcquisitionError, LockReleaseError, LockExtendError } from '@microfleet/ioredis-lock';
import Redis from 'ioredis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, ...(name ? { connectionName: name } : {}) });
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const key = `fencer-survey-${process.pid}`;

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
const a = connect(), b = connect(), raw = connect('fencer-survey-check');
try {
  const l1 = createLock(a, { timeout: 2000, retries: 0, delay: 50 });
  await l1.acquire(key);
  const token = await raw.get(key);
  console.log(`acquired: key=${key} token=${token} (the lock's uuid)`);
  check(typeof token === 'string' && token.length >= 32, 'key holds the lock uuid');
  await l1.extend(6000);
  const pttl = await raw.pttl(key);
  check(pttl > 5000, `extended to 6000 ms (pttl ${pttl})`);

  const l2 = createLock(b, { timeout: 2000, retries: 3, delay: 50 });
  let refused = false;
  try { await l2.acquire(key); } catch (e) { refused = e instanceof LockAcquisitionError; console.log('second acquirer:', e.constructor.name, e.message); }
  check(refused, 'second acquirer refused (after 3 retries) while the first holds the lock');
  let extendRefused = false;
  try { await l2.extend(1000); } catch (e) { extendRefused = e instanceof LockExtendError; }
  check(extendRefused, 'the refused lock object cannot extend (the library checks this client-side)');
  check(await raw.get(key) === token, 'holder token unchanged');

  await l1.release();
  console.log('released');
  check(await raw.exists(key) === 0, 'key gone after release');
  let releaseAgain = false;
  try { await l1.release(); } catch (e) { releaseAgain = e instanceof LockReleaseError; }
  check(releaseAgain, 'second release of the same lock is an error');

  await l2.acquire(key);
  console.log('second acquirer now acquired');
  // the old holder's extend must fail now that someone else holds it
  const stale = createLock(a, { timeout: 2000 });
  stale._locked = true; stale._key = key; // pretend to be a stale holder with a different uuid
  let staleExtend = false;
  try { await stale.extend(5000); } catch (e) { staleExtend = e instanceof LockExtendError; console.log('stale extend:', e.message); }
  check(staleExtend, "a holder with another uuid cannot extend the current holder's lock");
  await l2.release();
  console.log('PASS @microfleet/ioredis-lock');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) c.disconnect();
}
