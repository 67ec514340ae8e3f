// Driver for @sesamecare-oss/redlock 1.4.0 (ioredis): acquire, extend, using()
// with automatic extension, multi-resource locks, a refused second acquirer.
// REDIS_ADDR=host:port (default 127.0.0.1:6379). Exits 0 when every step behaved.
import { Redlock, ResourceLockedError, ExecutionError } from '@sesamecare-oss/redlock';
import Redis from 'ioredis';

const [host, port] = (process.env.REDIS_ADDR || '127.0.0.1:6379').split(':');
const connect = (name) => new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, ...(name ? { connectionName: name } : {}) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const check = (cond, msg) => { if (!cond) throw new Error(msg); console.log('ok:', msg); };
const key = `fencer-survey-${process.pid}`;

// raw: the driver's own checking connection (named so MONITOR.txt can leave it out)
const a = connect(), b = connect(), raw = connect('fencer-survey-check');
const rlA = new Redlock([a], { retryCount: 0 });
const rlB = new Redlock([b], { retryCount: 2, retryDelay: 100, retryJitter: 10 });
for (const rl of [rlA, rlB]) rl.on('error', (e) => { if (!(e instanceof ResourceLockedError)) console.error('redlock error event:', e.message); });

async function refused(rl, resources, what) {
  try {
    const l = await rl.acquire(resources, 2000);
    await l.release();
    return false;
  } catch (e) {
    console.log(`${what}: ${e.constructor.name}: ${e.message}`);
    return e instanceof ExecutionError;
  }
}

try {
  let lock = await rlA.acquire([key], 2000);
  console.log(`acquired: resources=${JSON.stringify(lock.resources)} value=${lock.value} expires in ${lock.expiration - Date.now()} ms`);
  check(await raw.get(key) === lock.value, 'key holds the lock value');
  lock = await lock.extend(5000);
  const pttl = await raw.pttl(key);
  check(pttl > 4000, `extended to 5000 ms (pttl ${pttl})`);
  check(await refused(rlB, [key], 'second acquirer'), 'second acquirer refused (after its retries) while the first holds the lock');
  await lock.release();
  console.log('released');
  check(await raw.exists(key) === 0, 'key gone after release');
  const lockB = await rlB.acquire([key], 2000);
  console.log(`second acquirer now acquired: value=${lockB.value}`);
  await lockB.release();

  // multi-resource lock: all or nothing
  const k1 = `${key}:1`, k2 = `${key}:2`;
  const multi = await rlA.acquire([k1, k2], 3000);
  console.log(`multi-resource lock acquired on ${k1}, ${k2}`);
  check(await refused(rlB, [k2, `${key}:3`], 'overlapping multi-resource acquire'), 'overlapping multi-resource acquire refused');
  check(await raw.exists(`${key}:3`) === 0, 'refused multi acquire left no key behind');
  await (await multi.extend(4000)).release();
  check(await raw.exists(k1, k2) === 0, 'multi-resource lock extended and released');

  // using(): automatic extension while the routine runs
  let extensions = 0;
  await rlA.using([key], 1000, { automaticExtensionThreshold: 500 }, async (signal, ctx) => {
    await sleep(1600);
    extensions = ctx.extensions;
    if (signal.aborted) throw signal.error;
    check(await refused(rlB, [key], 'acquire during using()'), 'second acquirer refused during using()');
  });
  check(extensions >= 1, `using() extended the lock automatically (${extensions} extensions)`);
  check(await raw.exists(key) === 0, 'using() released the lock');
  console.log('PASS @sesamecare-oss/redlock');
} catch (e) {
  console.error('FAIL:', e && e.stack || e);
  process.exitCode = 1;
} finally {
  for (const c of [a, b, raw]) c.disconnect();
}
