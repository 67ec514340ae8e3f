// tokenFor with the real node-redlock (v5) taking its lock on fencer.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Redlock from 'redlock';
import { FencedRedis, LeaseLostError, tokenFor } from '../src/index.js';
import { call, fileScope, redisClient, startFencerd, startRedis } from './harness.js';
import { wantStale } from './fencetest.js';

const scope = fileScope();
let d;
before(async () => { d = await startFencerd(scope); });
after(scope.cleanup);

test('node-redlock takes a lock on fencer; tokenFor fetches its token', async (t) => {
  const redis = redisClient(t, d.addr);
  const redlock = new Redlock([redis], { retryCount: 20, retryDelay: 100 });
  const lock = await redlock.acquire(['report'], 5000);
  const token = await tokenFor(redis, 'report', lock.value);
  assert.equal(typeof token, 'bigint');
  const st = await call(d.addr, 'FENCE.STATUS', 'report');
  assert.equal(st[0], lock.value);
  assert.equal(BigInt(st[1]), token);
  // Extending keeps the token.
  const extended = await lock.extend(5000);
  assert.equal(await tokenFor(redis, 'report', extended.value), token);
  // A value that does not hold the lock has no token.
  await assert.rejects(tokenFor(redis, 'report', 'someone-else'), LeaseLostError);
  await extended.release();
  await assert.rejects(tokenFor(redis, 'report', lock.value), LeaseLostError);

  // The next holder's token is larger, and fences the first one's writes.
  const next = await redlock.acquire(['report'], 5000);
  const token2 = await tokenFor(redis, 'report', next.value);
  assert.ok(token2 > token, `${token2} after ${token}`);
  const store = new FencedRedis(redisClient(t, (await startRedis(t)).addr));
  await store.set('report', token2, 'second');
  await wantStale(store.set('report', token, 'first, late'), 'report', token, token2);
  await next.release();
});

test('tokenFor reads the token exactly with stringNumbers, and without', async (t) => {
  const plain = redisClient(t, d.addr);
  const exact = redisClient(t, d.addr, { stringNumbers: true });
  assert.equal(await call(d.addr, 'SET', 'k', 'v1', 'NX', 'PX', '5000'), 'OK');
  const a = await tokenFor(plain, 'k', 'v1');
  const b = await tokenFor(exact, 'k', 'v1');
  assert.equal(a, b);
  assert.ok(a > 0n);
  await assert.rejects(tokenFor(/** @type {any} */ ({}), 'k', 'v1'), TypeError);
});
