// Driver for redlock-universal 0.8.5: SimpleLock through IoredisAdapter and
// NodeRedisAdapter, RedLock (one node), LockManager batch locks: acquire,
// extend, using() auto-extension, release, refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { createLock, createRedlock, IoredisAdapter, NodeRedisAdapter, LockManager, LockAcquisitionError } from 'redlock-universal';
import Redis from 'ioredis';
import { createClient } from 'redis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const base = `fencer-survey-${process.pid}`;

const io = () => new Redis({ host, port: Number(port), maxRetriesPerRequest: 1 });
const nr = () => createClient({ socket: { host, port: Number(port), reconnectStrategy: false } })
  .on('error', (e) => console.error('redis client error:', e.message)).connect();
// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
const raw = new Redis({ host, port: Number(port), connectionName: 'fencer-survey-check' });
const clients = [raw];

async function refused(lock, what) {
  try { const h = await lock.acquire(); await lock.release(h); return false; } catch (e) {
    console.log(`${what}: ${e.constructor.name}: ${e.message}`);
    return e instanceof LockAcquisitionError || /acquire/i.test(e.message);
  }
}

async function exercise(label, adapterA, adapterB, make) {
  const key = `${base}:${label}`;
  const a = make(adapterA, key, 2000, 0), b = make(adapterB, key, 2000, 2);
  const h = await a.acquire();
  check(await raw.get(key) === h.value, `${label}: acquired key=${key} value=${h.value}`);
  check(await a.extend(h, 6000), `${label}: extend(6000) returned true`);
  const pttl = await raw.pttl(key);
  check(pttl > 5000, `${label}: extended (pttl ${pttl})`);
  check(await refused(b, `${label}: second acquirer`), `${label}: second acquirer refused while the first holds the lock`);
  check(await a.release(h), `${label}: released`);
  check(await raw.exists(key) === 0, `${label}: key gone after release`);
  const h2 = await b.acquire();
  check(!!h2, `${label}: second acquirer acquires after release`);
  await b.release(h2);
  // using(): auto-extension. Keep ttl above 1250 ms: below that the library's
  // scheduler (extend at 80% of ttl, but never sooner than 1000 ms) re-extends
  // in a tight loop (tens of thousands of EVALSHA a second).
  const auto = make(adapterA, key, 2000, 0);
  let pttlInside = 0;
  await auto.using(async () => { await sleep(2500); pttlInside = await raw.pttl(key); });
  check(pttlInside > 0, `${label}: using() kept a 2000 ms lock alive for 2.5 s (pttl ${pttlInside})`);
  check(await raw.exists(key) === 0, `${label}: using() released`);
}

try {
  const i1 = io(), i2 = io(); clients.push(i1, i2);
  const [n1, n2] = await Promise.all([nr(), nr()]); clients.push(n1, n2);
  const simple = (ad, key, ttl, retries) => createLock({ adapter: ad, key, ttl, retryAttempts: retries, retryDelay: 100 });
  const red = (ad, key, ttl, retries) => createRedlock({ adapters: [ad], key, ttl, retryAttempts: retries, retryDelay: 100 });
  await exercise('simple-ioredis', new IoredisAdapter(i1), new IoredisAdapter(i2), simple);
  await exercise('simple-node-redis', new NodeRedisAdapter(n1), new NodeRedisAdapter(n2), simple);
  await exercise('redlock-ioredis', new IoredisAdapter(i1), new IoredisAdapter(i2), red);

  // batch: all or nothing
  const mA = new LockManager({ nodes: [new IoredisAdapter(i1)], defaultTTL: 3000 });
  const mB = new LockManager({ nodes: [new IoredisAdapter(i2)], defaultTTL: 3000 });
  const hs = await mA.acquireBatch([`${base}:b1`, `${base}:b2`]);
  check(hs.length === 2, 'batch lock on 2 keys acquired');
  let batchRefused = false;
  try { await mB.releaseBatch(await mB.acquireBatch([`${base}:b2`, `${base}:b3`])); } catch (e) { batchRefused = true; console.log('overlapping batch:', e.message); }
  check(batchRefused, 'overlapping batch refused');
  check(await raw.exists(`${base}:b3`) === 0, 'refused batch left no key behind');
  await mA.releaseBatch(hs);
  check(await raw.exists(`${base}:b1`, `${base}:b2`) === 0, 'batch released');
  console.log('PASS redlock-universal');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of clients) { try { c.disconnect ? c.disconnect() : await c.close(); } catch {} }
  setTimeout(() => process.exit(), 200).unref();
}
