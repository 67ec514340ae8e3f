// Driver for node-redis-warlock 1.0.2 with node-redis 3 (callback API): lock
// (SET NX PX), touch (parityRelock script: SET ... PX ttl XX, TTL and id passed
// as KEYS), optimistic retries, unlock (parityDel script), refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import Warlock from 'node-redis-warlock';
import redis from 'redis';
import { promisify } from 'node:util';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => {
  const c = redis.createClient({ host, port: Number(port), retry_strategy: () => undefined });
  c.on('error', (e) => console.error('redis client error:', e.message));
  if (name) c.client('setname', name); // node-redis 3 has no connection-name option
  return c;
};
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const key = `fencer-survey-${process.pid}`;
const lockKey = `${key}:lock`;

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
const a = connect(), b = connect(), raw = connect('fencer-survey-check');
const rget = promisify(raw.get).bind(raw), rpttl = promisify(raw.pttl).bind(raw), rexists = promisify(raw.exists).bind(raw);
const wa = Warlock(a), wb = Warlock(b);
const lock = (w, k, ttl) => new Promise((res, rej) => w.lock(k, ttl, (err, unlock, id) => (err ? rej(err) : res({ unlock, id }))));
const optimistic = (w, k, ttl, n, wait) => new Promise((res) => w.optimistic(k, ttl, n, wait, (err, unlock) => res({ err, unlock })));
const unlockP = (fn) => new Promise((res, rej) => fn((err, r) => (err ? rej(err) : res(r))));

try {
  const l1 = await lock(wa, key, 2000);
  check(typeof l1.unlock === 'function', `acquired: key=${lockKey} id=${l1.id}`);
  check(await rget(lockKey) === l1.id, 'key holds the lock id');
  const touched = await wa.touch(key, l1.id, 6000);
  const pttl = await rpttl(lockKey);
  check(touched === 'OK' && pttl > 5000, `touch() extended to 6000 ms (reply ${touched}, pttl ${pttl})`);
  const l2 = await lock(wb, key, 2000);
  check(l2.unlock === false, 'second acquirer refused by lock() while the first holds it');
  const o = await optimistic(wb, key, 2000, 3, 50);
  check(o.err && /unable to obtain lock/.test(o.err.message), `second acquirer optimistic() gave up after 3 attempts: ${o.err && o.err.message}`);
  check(await wb.touch(key, 'not-the-id', 6000) === 0, 'touch() with a wrong id does nothing');
  check(await unlockP((cb) => wb.unlock(key, 'not-the-id', cb)) === 0, 'unlock() with a wrong id does nothing');
  check(await unlockP(l1.unlock) === 1, 'released (unlock returned 1)');
  check(await rexists(lockKey) === 0, 'key gone after release');
  const l3 = await lock(wb, key, 2000);
  check(typeof l3.unlock === 'function', 'second acquirer acquires after release');
  await unlockP(l3.unlock);
  console.log('PASS node-redis-warlock');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) c.quit();
}
