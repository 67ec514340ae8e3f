// FencedRedis against a real redis-server, mirroring fence/fenceredis's
// tests, and its agreement with the Go package (script and key layout).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FencedRedis, TokenRangeError } from '../src/index.js';
import { script } from '../src/fence-redis.js';
import { fileScope, redisClient, startRedis } from './harness.js';
import { checkHistory, wantStale, writers } from './fencetest.js';

const scope = fileScope();
let srv;
before(async () => { srv = await startRedis(scope); });
after(scope.cleanup);

test('set, hset, del: first write, equal admitted, lower refused', async (t) => {
  const r = redisClient(t, srv.addr);
  const s = new FencedRedis(r);
  assert.equal(await s.highest('k'), null);
  await s.set('k', 5n, 'five');
  await s.set('k', 5n, 'five again');
  await wantStale(s.set('k', 4n, 'four'), 'k', 4, 5);
  assert.equal(await r.get('k'), 'five again');
  await s.set('k', 8, 'eight', { ttl: 10000 });
  assert.equal(await r.get('k'), 'eight');
  const pttl = await r.pttl('k');
  assert.ok(pttl > 0 && pttl <= 10000, `PTTL ${pttl}`);
  assert.equal(await s.highest('k'), 8n);

  await s.hset('h', 3n, { name: 'ada', role: 'admin' });
  await s.hset('h', 4n, ['role', 'user']);
  await wantStale(s.hset('h', 3n, new Map([['role', 'root']])), 'h', 3, 4);
  assert.deepEqual(await r.hgetall('h'), { name: 'ada', role: 'user' });
  await assert.rejects(s.hset('h', 9n, ['role']), TypeError);

  // A delete keeps the token: the stale writer cannot bring the key back.
  await s.del('k', 9n);
  await wantStale(s.set('k', 8n, 'eight, late'), 'k', 8, 9);
  assert.equal(await r.exists('k'), 0);
  await s.set('k', '9', 'nine');
  assert.equal(await r.get('k'), 'nine');
});

test('a write Redis refuses records no token', async (t) => {
  const r = redisClient(t, srv.addr);
  const s = new FencedRedis(r);
  await s.set('wt', 2n, 'a string');
  await assert.rejects(s.hset('wt', 7n, { f: 'v' }), /WRONGTYPE/);
  assert.equal(await s.highest('wt'), 2n);
  await s.set('wt', 3n, 'still mine');
});

test('tokens are compared exactly beyond 2^53 and across a change of length', async (t) => {
  const s = new FencedRedis(redisClient(t, srv.addr));
  await s.set('big', 9n, 'x');
  await s.set('big', 10n, 'x');
  await wantStale(s.set('big', 9n, 'x'), 'big', 9, 10);
  const big = (1n << 53n) + 1n; // as a double, equal to 2^53
  await s.set('big', big, 'x');
  await wantStale(s.set('big', big - 1n, 'x'), 'big', big - 1n, big);
  const max = (1n << 64n) - 1n;
  await s.set('big', max, 'x');
  await wantStale(s.set('big', max - 1n, 'x'), 'big', max - 1n, max);
  await assert.rejects(s.set('big', max + 1n, 'x'), TokenRangeError);
  await assert.rejects(s.set('big', 2 ** 60, 'x'), TokenRangeError); // an unsafe number
});

test('tokenKey option', async (t) => {
  const r = redisClient(t, srv.addr);
  const s = new FencedRedis(r, { tokenKey: (k) => `tokens:${k}` });
  await s.set('tk', 12n, 'v');
  assert.equal(await r.get('tokens:tk'), '12');
  assert.equal(await r.exists('fence:{tk}'), 0);
});

test('the script and key layout are fenceredis\'s, so Go and Node writers fence each other', async (t) => {
  // The script text is the Go package's, byte for byte (one SHA1).
  const here = dirname(fileURLToPath(import.meta.url));
  const go = readFileSync(join(here, '..', '..', '..', 'fence', 'fenceredis', 'fenceredis.go'), 'utf8');
  const goScript = /redis\.NewScript\(`([^`]*)`\)/.exec(go)[1];
  const sha = (x) => createHash('sha1').update(x).digest('hex');
  assert.equal(sha(script), sha(goScript));

  const r = redisClient(t, srv.addr);
  const s = new FencedRedis(r);
  // A Node writer records its token where Go's reads it...
  await s.set('shared', 20n, 'node wrote this');
  assert.equal(await r.get('fence:{shared}'), '20');
  await wantStale(s.set('shared', 19n, 'lower'), 'shared', 19, 20);
  assert.equal(await r.get('shared'), 'node wrote this');
  // ...and a token a Go writer recorded (the same script, loaded by SHA
  // with EVALSHA as go-redis's Script.Run does) fences a Node writer.
  const goRun = await r.evalsha(sha(goScript), 2, 'shared', 'fence:{shared}', '25', 'set', 'go wrote this', '0');
  assert.deepEqual(goRun, [1, '25']);
  await wantStale(s.set('shared', 21n, 'node, late'), 'shared', 21, 25);
  assert.equal(await r.get('shared'), 'go wrote this');
});

test('concurrent writers: landed tokens never go down, the newest holder is never refused', async (t) => {
  const holders = 8;
  const writes = 30;
  const mon = await redisClient(t, srv.addr).monitor();
  t.after(() => mon.disconnect());
  const landed = { doc: [], hash: [] };
  let ended;
  const end = new Promise((resolve) => { ended = resolve; });
  mon.on('monitor', (_time, args, source) => {
    if (String(args[0]).toUpperCase() === 'ECHO' && args[1] === 'end of test writes') ended();
    if (source === 'lua' && String(args[0]).toUpperCase() === 'SET' && /^fence:\{(doc|hash)\}$/.test(args[1])) {
      landed[args[1].slice(7, -1)].push(BigInt(args[2]));
    }
  });
  const clients = Array.from({ length: holders }, () => new FencedRedis(redisClient(t, srv.addr)));
  const refused = await writers(holders, writes, async (token, i) => {
    const s = clients[Number(token) - 1];
    const value = `holder ${token} write ${i}`;
    switch (Math.floor(Math.random() * 3)) {
      case 0: return s.set('doc', token, value);
      case 1: return s.del('doc', token);
      default: return s.hset('hash', token, { by: value });
    }
  });
  await redisClient(t, srv.addr).echo('end of test writes');
  await end;
  checkHistory(refused, holders, writes, landed.doc, landed.hash);
  assert.match(await redisClient(t, srv.addr).hget('hash', 'by'), new RegExp(`^holder ${holders} `));
});
