// Typed use of the package, checked by tsc --noEmit (npm test) against
// index.d.ts; never run.

import { Redis } from 'ioredis';
import pg from 'pg';
import {
  Client, FencedRedis, FencedTable, LeaseLostError, LockedError, StaleTokenError, TokenTable,
  UncertainError, tokenFor, type AcquireOptions, type Lease,
} from '@fencer/client';

async function use(): Promise<bigint> {
  const client = new Client(['127.0.0.1:7379', '127.0.0.1:7479'], {
    auth: { username: 'app', password: 'secret' },
    tls: { ca: [Buffer.from('')], servername: 'fencer.test' },
    requestTimeout: 5000,
    failoverTimeout: 15000,
  });
  const ac = new AbortController();
  const opts: AcquireOptions = { ttl: 10_000, wait: 30_000, autoRenew: true, signal: ac.signal };
  const lease: Lease = await client.acquire('report', opts);
  const token: bigint = lease.token;
  const name: string = lease.name;
  const owner: string = lease.owner;
  const until: Date = lease.validUntil;
  lease.signal.addEventListener('abort', () => {
    const why: unknown = lease.signal.reason;
    if (why instanceof LeaseLostError) console.log(name, owner, until, why.message);
  });
  await lease.extend();
  await lease.extend({ signal: AbortSignal.timeout(1000) });
  // @ts-expect-error: a lease renews for the TTL it was acquired with
  await lease.extend(20_000);
  try {
    await client.tryAcquire('other', { ttl: 1000 });
  } catch (e) {
    if (e instanceof LockedError || e instanceof UncertainError) console.log(e.code);
  }

  const redis = new Redis();
  const store = new FencedRedis(redis);
  await store.set('report', token, 'v', { ttl: 1000 });
  await store.hset('h', token, { a: 'b' });
  await store.del('report', token);
  const h: bigint | null = await store.highest('report');

  const pool = new pg.Pool();
  const docs = new FencedTable('docs', 'id', 'token', ['body']);
  await docs.write(pool, 'r1', token, ['body']);
  const tokens = new TokenTable();
  await tokens.createTable(pool);
  const n: number = await tokens.transaction(pool, 'stream', token, async (c) => {
    await c.query('INSERT INTO t VALUES ($1)', [1]);
    return 1;
  });
  try {
    await docs.write(pool, 'r1', 1n, ['late']);
  } catch (e) {
    if (e instanceof StaleTokenError) console.log(e.resource, e.token + 1n, e.highest);
  }
  const t2: bigint = await tokenFor(redis, 'report', 'value');
  await lease.release();
  await client.close();
  return t2 + (h ?? 0n) + BigInt(n);
}
void use;
