// Checks the fenced-store tests share, as Go's internal/fencetest: a
// refusal's fields, and holders with interleaved tokens writing at once,
// whose landed writes must be in token order.

import assert from 'node:assert/strict';
import { StaleTokenError } from '../src/index.js';
import { sleep } from './harness.js';

/** wantStale asserts that p rejects with a StaleTokenError for resource,
 * token and highest. */
export async function wantStale(p, resource, token, highest) {
  const err = await p.then(() => undefined, (e) => e);
  assert.ok(err instanceof StaleTokenError, `want a StaleTokenError, got ${err}`);
  assert.equal(err.resource, resource);
  assert.equal(err.token, BigInt(token));
  assert.equal(err.highest, BigInt(highest));
}

/** writers runs holders with tokens 1..holders, each writing `writes`
 * times through write(token, i), at once; holder h starts 2(h-1) ms after
 * the first. Returns how often each token was refused. */
export async function writers(holders, writes, write) {
  const refused = new Array(holders + 1).fill(0);
  await Promise.all(Array.from({ length: holders }, async (_, k) => {
    const h = k + 1;
    await sleep(2 * (h - 1));
    for (let i = 0; i < writes; i++) {
      if (Math.random() < 1 / 3) await sleep(Math.random());
      try {
        await write(BigInt(h), i);
      } catch (e) {
        if (!(e instanceof StaleTokenError) || e.token !== BigInt(h) || e.highest <= BigInt(h)) throw e;
        refused[h]++;
      }
    }
  }));
  return refused;
}

/** checkHistory: in each landed history (tokens of the writes that landed,
 * in landing order) a lower token never lands after a higher one; some
 * write landed; the newest holder was never refused; every write either
 * landed or was refused. */
export function checkHistory(refused, holders, writes, ...landed) {
  let total = 0;
  for (const history of landed) {
    for (let i = 1; i < history.length; i++) {
      assert.ok(history[i] >= history[i - 1], `token ${history[i]} landed after ${history[i - 1]}`);
    }
    total += history.length;
  }
  assert.ok(total > 0, 'no write landed');
  assert.equal(refused[holders], 0, 'the newest holder was refused');
  total += refused.reduce((a, b) => a + b, 0);
  assert.equal(total, holders * writes);
}
