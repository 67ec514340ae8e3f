// The first holder of the Kleppmann run, in a process of its own so that
// the test can pause it (SIGSTOP): it takes the lease, checks it is valid,
// and then, told to go on, writes with its token to PostgreSQL and Redis,
// as a holder does whose pause fell between its check and its write.
//
// argv: fencer-addr postgres-url redis-addr. Reports lines of JSON on stdout.

import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Client, FencedRedis, FencedTable, StaleTokenError } from '../src/index.js';

const [addr, pgURL, redisAddr] = process.argv.slice(2);
const say = (o) => process.stdout.write(`${JSON.stringify(o, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}\n`);

const client = new Client([addr]);
const db = new pg.Client({ connectionString: pgURL });
await db.connect();
const [host, port] = redisAddr.split(':');
const redis = new Redis({ host, port: Number(port) });
const docs = new FencedTable('reports', 'id', 'token', ['body']);
const store = new FencedRedis(redis);

const lease = await client.acquire('report', { ttl: 1000, autoRenew: true });
say({ event: 'acquired', token: lease.token });
const input = createInterface({ input: process.stdin });
const lines = input[Symbol.asyncIterator]();
if (!lease.signal.aborted) say({ event: 'checked' }); // the lease is valid: go on and write
await lines.next(); // paused here; the parent says "write" after SIGCONT
input.close();

async function attempt(write) {
  try {
    await write();
    return { ok: true };
  } catch (e) {
    if (!(e instanceof StaleTokenError)) throw e;
    return { stale: true, resource: e.resource, token: e.token, highest: e.highest };
  }
}
const pgResult = await attempt(() => docs.write(db, 'r1', lease.token, ['first holder, late']));
const redisResult = await attempt(() => store.set('report', lease.token, 'first holder, late'));
// By now the client has noticed too: its validity ran out during the pause.
await new Promise((resolve) => (lease.signal.aborted ? resolve() : lease.signal.addEventListener('abort', resolve)));
say({ event: 'wrote', pg: pgResult, redis: redisResult, lost: lease.signal.reason?.name });
await lease.release().catch(() => {});
await client.close();
await db.end();
redis.disconnect();
