// The client against one real fencerd: leases, waits, loss, errors.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  Client, ClosedError, InvalidArgumentError, LeaseLostError, LockedError, NoLeaderError, ReleasedError,
  ServerError, UncertainError,
} from '../src/index.js';
import { settle } from '../src/util.js';
import { call, callWith, eventually, fileScope, freePorts, silentNode, sleep, slowLink, startFencerd } from './harness.js';

// One node for the tests that neither pause nor stop it; each uses its own
// lock names.
const scope = fileScope();
let shared;
before(async () => { shared = await startFencerd(scope); });
after(scope.cleanup);

/** client makes a Client closed when the test ends. */
function client(t, addrs, opts) {
  const c = new Client(addrs, opts);
  t.after(() => c.close());
  return c;
}

test('acquire, extend, release: token, status, idempotent release', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const l = await c.acquire('doc', { ttl: 5000 });
  assert.equal(typeof l.token, 'bigint');
  assert.ok(l.token > 0n);
  assert.equal(l.name, 'doc');
  assert.match(l.owner, /^[0-9a-f]{32}$/);
  const st = await call(d.addr, 'FENCE.STATUS', 'doc');
  assert.equal(st[0], l.owner);
  assert.equal(BigInt(st[1]), l.token);
  // The client's view of the validity ends before the server's.
  assert.ok(l.remaining > 4000 && l.remaining <= Number(st[2]), `remaining ${l.remaining}, server ${st[2]}`);
  assert.ok(l.validUntil.getTime() <= Date.now() + 5000);

  await assert.rejects(c.tryAcquire('doc'), LockedError);
  await sleep(500);
  await l.extend();
  assert.equal(l.ttl, 5000);
  assert.ok(l.remaining > 4500, `remaining ${l.remaining} after extend()`);
  assert.equal(l.signal.aborted, false);

  await l.release();
  assert.ok(l.signal.aborted);
  assert.ok(l.signal.reason instanceof ReleasedError);
  await l.release(); // idempotent
  assert.equal(await call(d.addr, 'FENCE.STATUS', 'doc'), null);
  await assert.rejects(l.extend(), ReleasedError);

  // A new grant has a larger token.
  const l2 = await c.tryAcquire('doc', { ttl: 1000 });
  assert.ok(l2.token > l.token, `${l2.token} after ${l.token}`);
  await l2.release();
});

test('extend takes no TTL: a lease keeps its TTL, and auto-renewal its schedule', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const l = await c.acquire('ttl-fixed', { ttl: 8000, autoRenew: true });
  // A shorter TTL would end the server's lease before the client's view
  // of it, and off the renewal schedule: extend refuses one.
  const err = await l.extend(1000).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError, String(err));
  assert.equal(err.argument, 'ttl');
  assert.equal(l.ttl, 8000);
  assert.equal(l.signal.aborted, false);
  await l.extend({ signal: AbortSignal.timeout(3000) });
  const until = l.validUntil.getTime();
  // The server holds it for the lease's TTL, and the client's view ends first.
  let st = await call(d.addr, 'FENCE.STATUS', 'ttl-fixed');
  assert.equal(st[0], l.owner);
  assert.ok(Number(st[2]) > 7000 && l.remaining <= Number(st[2]), `server ${st[2]}ms, client ${l.remaining}ms`);
  // Renewed about every TTL/3 (2.7 s) from that extend: by 4 s, once,
  // and both views moved on.
  await sleep(4000);
  assert.equal(l.signal.aborted, false, `lost: ${l.signal.reason}`);
  assert.ok(l.validUntil.getTime() > until + 2000, `validity moved ${l.validUntil.getTime() - until}ms`);
  st = await call(d.addr, 'FENCE.STATUS', 'ttl-fixed');
  assert.ok(Number(st[2]) > 5500 && l.remaining <= Number(st[2]), `server ${st[2]}ms, client ${l.remaining}ms`);
  await l.release();
});

test('20 leases and 20 concurrent requests on one client: no MaxListenersExceededWarning', async (t) => {
  const d = shared;
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  const c = client(t, [d.addr]);
  const leases = await Promise.all(Array.from({ length: 20 }, (_, i) => c.acquire(`many-${i}`, { ttl: 3000, autoRenew: true })));
  await Promise.all(leases.map((l) => l.extend()));
  await Promise.all(leases.map((l) => assert.rejects(c.tryAcquire(l.name), LockedError)));
  await Promise.all(leases.map((l) => l.release()));
  await sleep(100); // warnings are emitted on a later tick
  const bad = warnings.filter((w) => w.name === 'MaxListenersExceededWarning');
  assert.deepEqual(bad.map((w) => w.message), []);
});

test('an owner value serves one lease: a released owner is refused', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const l = await c.acquire('one', { ttl: 2000, owner: 'fixed-owner' });
  await l.release();
  await assert.rejects(c.acquire('one', { ttl: 2000, owner: 'fixed-owner', wait: 500 }), LockedError);
});

test('errors by code', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  await assert.rejects(c.acquire('', {}), InvalidArgumentError);
  const err = await c.acquire('k', { ttl: 50 }).catch((e) => e);
  assert.ok(err instanceof InvalidArgumentError, String(err));
  assert.equal(err.code, 'ERR');
  assert.equal(err.argument, 'ttl');
  const err2 = await c.acquire('k'.repeat(1100), { ttl: 1000 }).catch((e) => e);
  assert.ok(err2 instanceof InvalidArgumentError, String(err2));
  assert.equal(err2.argument, 'key');
  // WRONGTYPE: a lock command on a hash.
  await call(d.addr, 'HSET', 'hash', 'f', 'v');
  const err3 = await c.tryAcquire('hash').catch((e) => e);
  assert.ok(err3 instanceof ServerError, String(err3));
  assert.equal(err3.code, 'WRONGTYPE');
});

test('no node reachable: NoLeaderError within the failover timeout', async (t) => {
  const [port] = await freePorts(1);
  const c = client(t, [`127.0.0.1:${port}`], { failoverTimeout: 800, requestTimeout: 300 });
  const t0 = Date.now();
  await assert.rejects(c.tryAcquire('x'), NoLeaderError);
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0}ms`);
});

test('a waiting acquire never holds up renewals of other leases on the shared connection', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const holder = client(t, [d.addr]);
  const h = await holder.acquire('busy', { ttl: 30000 });
  // A renews every 200 ms on the shared connection; its lease ends 600 ms
  // after a renewal that does not come back.
  const a = await c.acquire('renewed', { ttl: 600, autoRenew: true });
  const startUntil = a.validUntil.getTime();
  // B waits for 3 s in the server's queue. Were its WAIT on the shared
  // connection, the server would answer A's renewals only after it.
  const b = c.acquire('busy', { ttl: 10000, wait: 20000 });
  await eventually(5000, async () => (await d.waiters()) === 1, 'B queued');
  await sleep(2000);
  assert.equal(a.signal.aborted, false, `A lost while B waited: ${a.signal.reason}`);
  await h.release();
  const bl = await b;
  assert.ok(bl.token > h.token);
  assert.equal(a.signal.aborted, false, `A lost: ${a.signal.reason}`);
  assert.ok(a.validUntil.getTime() > startUntil + 1500, 'A was not renewed during the wait');
  const st = await call(d.addr, 'FENCE.STATUS', 'renewed');
  assert.equal(st?.[0], a.owner);
  await a.release();
  await bl.release();
});

test('waits are served in FIFO order', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const h = await c.acquire('fifo', { ttl: 30000 });
  const order = [];
  const waiters = [];
  for (let i = 1; i <= 3; i++) {
    waiters.push(c.acquire('fifo', { ttl: 10000, wait: 30000 }).then(async (l) => {
      order.push({ i, token: l.token });
      await sleep(50);
      await l.release();
    }));
    await eventually(5000, async () => (await d.waiters()) === i, `waiter ${i} queued`);
  }
  await h.release();
  await Promise.all(waiters);
  assert.deepEqual(order.map((o) => o.i), [1, 2, 3]);
  for (let k = 1; k < order.length; k++) assert.ok(order[k].token > order[k - 1].token);
});

test('aborting a waiting acquire closes its connection and leaves the queue', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const h = await c.acquire('q', { ttl: 30000 });
  const clientsBefore = connected(await call(d.addr, 'INFO', 'clients'));
  const ac = new AbortController();
  const w = c.acquire('q', { ttl: 10000, signal: ac.signal, owner: 'quitter' });
  await eventually(5000, async () => (await d.waiters()) === 1, 'queued');
  const t0 = Date.now();
  ac.abort(new Error('changed my mind'));
  await assert.rejects(w, /changed my mind/);
  assert.ok(Date.now() - t0 < 1000);
  // The server sees the hang-up and drops the waiter.
  await eventually(3000, async () => (await d.waiters()) === 0, 'waiter dropped');
  await eventually(3000, async () => connected(await call(d.addr, 'INFO', 'clients')) <= clientsBefore, 'wait connection closed');
  await h.release();
  // Nobody got the lock: the waiter was gone.
  assert.equal(await call(d.addr, 'FENCE.STATUS', 'q'), null);
});

test('acquires aborted while their wait connection is being opened leave no connection open', async (t) => {
  // AUTH makes opening a connection take a round trip, which the slow link
  // stretches: each acquire is aborted while its wait round is opening one.
  const d = await startFencerd(t, ['--requirepass', 'pw'], { connect: { password: 'pw' } });
  const clients = async () => connected(await callWith({ password: 'pw' }, d.addr, 'INFO', 'clients'));
  let abortNow = () => {};
  const link = await slowLink(t, d.addr, 150, () => abortNow());
  const c = client(t, [link.addr], { auth: { password: 'pw' } });
  const h = await c.acquire('slow', { ttl: 30000 }); // the shared connection is open
  const before = await clients();
  for (let i = 0; i < 5; i++) {
    const ac = new AbortController();
    abortNow = () => ac.abort(new Error('gave up'));
    await assert.rejects(c.acquire('slow', { ttl: 5000, signal: ac.signal }), /gave up/);
    abortNow = () => {};
  }
  // Every connection opened for a wait is closed once its AUTH reply is in.
  await eventually(5000, async () => link.open === 1 && (await clients()) === before, 'wait connections closed');
  await sleep(500); // and stays so
  assert.equal(link.open, 1);
  assert.equal(await clients(), before);
  await h.release();
});

function connected(info) {
  return Number(/connected_clients:(\d+)/.exec(info)[1]);
}

test('a revoked lease is reported lost on its signal', async (t) => {
  const d = shared;
  const c = client(t, [d.addr]);
  const l = await c.acquire('rv', { ttl: 900, autoRenew: true });
  assert.equal(await call(d.addr, 'FENCE.REVOKE', 'rv'), '1');
  const t0 = Date.now();
  await eventually(3000, () => l.signal.aborted, 'signal aborted');
  assert.ok(l.signal.reason instanceof LeaseLostError, String(l.signal.reason));
  assert.match(l.signal.reason.message, /no longer holds/);
  assert.ok(Date.now() - t0 < 2000);
  await assert.rejects(l.release(), LeaseLostError);
  await l.release(); // settled: nothing more to do
});

test('a lease whose renewals cannot reach the server is lost when its validity runs out', async (t) => {
  const d = await startFencerd(t);
  const c = client(t, [d.addr], { requestTimeout: 300 });
  const l = await c.acquire('paused', { ttl: 1000, autoRenew: true });
  await sleep(400);
  d.pause();
  t.after(() => d.resume());
  const until = l.validUntil.getTime();
  await eventually(3000, () => l.signal.aborted, 'signal aborted');
  const late = Date.now() - until;
  assert.ok(l.signal.reason instanceof LeaseLostError, String(l.signal.reason));
  assert.match(l.signal.reason.message, /validity ran out/);
  assert.ok(late > -50 && late < 1000, `lost ${late}ms after its validity`);
  d.resume();
});

test('release does not wait for a renewal asking a hung node who leads', async (t) => {
  const d = await startFencerd(t);
  let onData = () => {};
  const hung = await silentNode(t, (chunk) => onData(chunk));
  const c = client(t, [d.addr, hung.addr], { requestTimeout: 1000 });
  const l = await c.acquire('probed', { ttl: 4000, autoRenew: true });
  // The renewal (at TTL/3) times out on the paused node, moves to the hung
  // one and asks it who leads, which waits up to a second for the
  // connection to come up (ioredis waits for replies to what it sends
  // first) or the reply.
  d.pause();
  t.after(() => d.resume());
  await settle(new Promise((resolve) => { onData = resolve; }), 10000, []);
  assert.equal(l.signal.aborted, false);
  const t0 = Date.now();
  // Nothing can answer the release itself: its own signal bounds it.
  const err = await l.release({ signal: AbortSignal.timeout(100) }).catch((e) => e);
  const took = Date.now() - t0;
  assert.equal(err?.name, 'TimeoutError', String(err));
  assert.ok(l.signal.reason instanceof ReleasedError, String(l.signal.reason));
  assert.ok(took < 500, `release took ${took}ms`);
  d.resume();
});

test('an acquire whose outcome stays unknown throws UncertainError and is released in the background', async (t) => {
  const d = await startFencerd(t);
  const c = client(t, [d.addr], { requestTimeout: 300, failoverTimeout: 2000 });
  await (await c.tryAcquire('warm', { ttl: 1000 })).release(); // the shared connection is open
  d.pause();
  t.after(() => d.resume());
  const err = await c.tryAcquire('u', { ttl: 30000, owner: 'unsure' }).catch((e) => e);
  assert.ok(err instanceof UncertainError, String(err));
  d.resume();
  // The acquire the paused node had read may run now; the background
  // release frees it (and is remembered), so the lock does not stay held
  // for its 30 s.
  await eventually(5000, async () => (await call(d.addr, 'FENCE.STATUS', 'u')) === null, 'u free');
});

test('close ends leases with ClosedError and refuses new requests', async (t) => {
  const d = shared;
  const c = new Client([d.addr]);
  const l = await c.acquire('c1', { ttl: 3000, autoRenew: true });
  await c.close();
  assert.ok(l.signal.reason instanceof ClosedError);
  await assert.rejects(c.acquire('c2'), ClosedError);
});
