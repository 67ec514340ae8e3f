// The client against a real three-node cluster: leader following, and a
// leader killed under an auto-renewing lease.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, LeaseLostError, LockedError } from '../src/index.js';
import { call, eventually, fileScope, startCluster } from './harness.js';

const scope = fileScope();
let cluster;
before(async () => { cluster = await startCluster(scope); });
after(scope.cleanup);

function client(t, addrs, opts) {
  const c = new Client(addrs, opts);
  t.after(() => c.close());
  return c;
}

test('the client moves to the leader when it is one of its addresses', async (t) => {
  const l = await cluster.leader();
  const addrs = [...cluster.addrs.filter((_, i) => i !== l), cluster.addrs[l]]; // leader last
  const c = client(t, addrs);
  const lease = await c.acquire('follow', { ttl: 5000 });
  assert.equal(c.nodes[c.cur].addr, cluster.addrs[l], 'requests go to the leader');
  await lease.release();
});

test('leader killed: an auto-renewing lease survives the failover, or is reported lost, never silently both', async (t) => {
  const c = client(t, cluster.addrs);
  const lease = await c.acquire('failover', { ttl: 4000, autoRenew: true });
  const old = await cluster.leader();
  const killedAt = Date.now();
  await cluster.nodes[old].kill9();
  t.after(async () => { cluster.nodes[old].start(); await cluster.nodes[old].waitReady(); });
  const alive = cluster.nodes.filter((_, i) => i !== old);
  const now = await cluster.leader(20000, alive);
  assert.notEqual(now, old);
  // Wait until the lease was renewed through the new leader for more than
  // a full TTL after the kill, or was reported lost.
  await eventually(20000, () => lease.signal.aborted || lease.validUntil.getTime() > killedAt + 4000 + 1500, 'renewed or lost');
  const st = await call(cluster.nodes[now].addr, 'FENCE.STATUS', 'failover');
  if (lease.signal.aborted) {
    assert.ok(lease.signal.reason instanceof LeaseLostError, String(lease.signal.reason));
    t.diagnostic(`lease reported lost: ${lease.signal.reason.message}`);
  } else {
    // The client counts it valid: the server must say it is ours.
    assert.equal(st?.[0], lease.owner, 'the client holds a lease the server gave to no one');
    assert.equal(BigInt(st[1]), lease.token);
    const other = client(t, alive.map((n) => n.addr));
    await assert.rejects(other.tryAcquire('failover'), LockedError);
    assert.equal(lease.signal.aborted, false);
    t.diagnostic('lease survived the failover');
  }
  // New grants work through the survivors, with larger tokens.
  const next = await c.acquire('after-failover', { ttl: 2000 });
  assert.ok(next.token > lease.token);
  await next.release();
  await lease.release().catch((e) => assert.ok(e instanceof LeaseLostError));
});
