// Kleppmann's scenario, for real: a holder (a child process) takes a lease,
// checks it, and is paused (SIGSTOP) past its TTL; a second client takes
// the lock with a higher token and writes to PostgreSQL and Redis through
// the fenced stores; the first holder resumes (SIGCONT) and writes: both
// stores refuse its late write, and keep the second's value.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Client, FencedRedis, FencedTable } from '../src/index.js';
import { call, eventually, redisClient, startFencerd, startPostgres, startRedis } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));

test('a paused holder\'s late write is refused by the fenced stores', async (t) => {
  const d = await startFencerd(t);
  const pgURL = await startPostgres(t);
  const redisSrv = await startRedis(t);
  const db = new pg.Client({ connectionString: pgURL });
  db.on('error', () => {}); // the server may stop first: node:test runs after-hooks in order
  await db.connect();
  t.after(() => db.end());
  await db.query('CREATE TABLE reports (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)');
  const redis = redisClient(t, redisSrv.addr);

  const child = spawn(process.execPath, [join(here, 'holder.js'), d.addr, pgURL, redisSrv.addr], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  t.after(() => { child.kill('SIGCONT'); child.kill('SIGKILL'); });
  const events = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (want) => {
    const { value, done } = await events.next();
    assert.ok(!done, `the holder exited before "${want}"`);
    const e = JSON.parse(value);
    assert.equal(e.event, want);
    return e;
  };

  const first = BigInt((await next('acquired')).token);
  await next('checked');
  child.kill('SIGSTOP');
  // The lease runs out on the server while the holder cannot renew it.
  await eventually(10000, async () => (await call(d.addr, 'FENCE.STATUS', 'report')) === null, 'the first lease expired');

  const c = new Client([d.addr]);
  t.after(() => c.close());
  const second = await c.acquire('report', { ttl: 10000 });
  assert.ok(second.token > first, `${second.token} after ${first}`);
  await new FencedTable('reports', 'id', 'token', ['body']).write(db, 'r1', second.token, ['second holder']);
  await new FencedRedis(redis).set('report', second.token, 'second holder');

  child.kill('SIGCONT');
  child.stdin.end('write\n');
  const wrote = await next('wrote');
  assert.deepEqual(wrote.pg, { stale: true, resource: 'r1', token: String(first), highest: String(second.token) });
  assert.deepEqual(wrote.redis, { stale: true, resource: 'report', token: String(first), highest: String(second.token) });
  assert.equal(wrote.lost, 'LeaseLostError', 'the holder\'s client reports its lease lost');
  const [code] = await exited;
  assert.equal(code, 0);

  const row = (await db.query("SELECT token, body FROM reports WHERE id = 'r1'")).rows[0];
  assert.deepEqual(row, { token: String(second.token), body: 'second holder' });
  assert.equal(await redis.get('report'), 'second holder');
  await second.release();
});
