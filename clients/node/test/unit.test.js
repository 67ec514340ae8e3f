// Pure parts: reading error replies by code, grants, the fencing rule.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AuthError, Client, InvalidArgumentError, NoLeaderError, NoPermError, ServerError, StaleTokenError, TLSError,
  TokenRangeError, UncertainError, ValueReleasedError, LeaseLostError, check, parseInvalidArgument, parseNotLeader, toToken,
} from '../src/index.js';
import { classify } from '../src/errors.js';
import { parseGrant } from '../src/grant.js';

const reply = (text) => Object.assign(new Error(text), { name: 'ReplyError' });

test('error replies are sorted by their code and fields, never their text', () => {
  const cases = [
    ['UNCERTAIN outcome unknown: leadership lost', UncertainError, true, true],
    ['NOLEADER no leader is available; retry later', NoLeaderError, true, false],
    ['TIMEOUT the request timed out before it took effect; retry later', NoLeaderError, true, false],
    ['SHUTDOWN the server is shutting down', NoLeaderError, true, false],
    ['NOTLEADER node-1 127.0.0.1:7379 not the leader: send commands to the leader', NoLeaderError, true, false],
    ['WRONGPASS invalid username-password pair or user is disabled.', AuthError, false, false],
    ['NOAUTH Authentication required.', AuthError, false, false],
    ['NOPERM this user has no permissions to access one of the keys', NoPermError, false, false],
    ['ERR invalid argument: ttl: 50ms is outside 100ms..24h0m0s', InvalidArgumentError, false, false],
    ['ERR syntax error', InvalidArgumentError, false, false],
    ['WRONGTYPE Operation against a key holding the wrong kind of value', ServerError, false, false],
    ['RELEASED this value released the key: it holds no lock on it and cannot write it or act on it again; nothing was done', ValueReleasedError, false, false],
    ['LEASELOST k2 the first attempt granted the keys, and some ran out before this one; the rest were released', LeaseLostError, false, false],
    // A text that reads like another code changes nothing.
    ['ERR UNCERTAIN looking text', InvalidArgumentError, false, false],
  ];
  for (const [text, cls, transient, unknown] of cases) {
    const f = classify(reply(text), true);
    assert.ok(f.error instanceof cls, `${text}: ${f.error?.constructor.name}`);
    assert.equal(f.transient, transient, text);
    assert.equal(f.unknown, unknown, text);
    assert.equal(f.error.code, text.split(' ')[0]);
  }
  assert.equal(classify(reply('NOTLEADER node-1 127.0.0.1:7379 not the leader'), true).leader, '127.0.0.1:7379');
  assert.equal(classify(reply('NOTLEADER - - not the leader, and no leader is known'), true).leader, undefined);
  assert.equal(classify(reply('ERR invalid argument: wait: 2h0m0s is outside 0..1h0m0s'), true).argument, 'wait');
  // Network failures are transient; unknown only once the command was sent.
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  assert.deepEqual([classify(reset, true).transient, classify(reset, true).unknown, classify(reset, false).unknown], [true, true, false]);
  const cert = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
  assert.ok(classify(cert, false).error instanceof TLSError);
  assert.equal(classify(cert, false).transient, false);
});

test('NOTLEADER fields and invalid-argument replies', () => {
  assert.deepEqual(parseNotLeader('node-9 10.0.0.1:7379 not the leader'), { id: 'node-9', addr: '10.0.0.1:7379' });
  assert.deepEqual(parseNotLeader('node-9 - not the leader, and the address is not known'), { id: 'node-9', addr: '' });
  assert.deepEqual(parseNotLeader('%2D a%20b text'), { id: '-', addr: 'a b' });
  assert.equal(parseNotLeader('%zz x text'), undefined);
  assert.equal(parseNotLeader('only-one'), undefined);
  assert.deepEqual(parseInvalidArgument('invalid argument: key: empty'), { argument: 'key', reason: 'empty' });
  assert.equal(parseInvalidArgument('syntax error'), undefined);
});

test('NOTLEADER moves the client to the leader it names, if it is one of its addresses', () => {
  const c = new Client(['127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3']);
  c.probe = false;
  c.failed(c.nodes[0], '127.0.0.1:3');
  assert.equal(c.nodes[c.cur].addr, '127.0.0.1:3');
  assert.equal(c.probe, false);
  c.failed(c.nodes[2], '10.9.9.9:7379'); // not one of ours: the next address, and ask who leads
  assert.equal(c.nodes[c.cur].addr, '127.0.0.1:1');
  assert.equal(c.probe, true);
  c.close();
});

test('grants: tokens are uint64 bigints, exact beyond 2^53', () => {
  const g = parseGrant(['18446744073709551615', '10000'], 10000, 5);
  assert.equal(g.token, 18446744073709551615n);
  assert.equal(parseGrant(['9007199254740993', '500'], 1000, 0).token, 9007199254740993n);
  assert.equal(parseGrant(['9007199254740993', '500'], 1000, 0).ttl, 500);
  assert.equal(parseGrant(null, 1000, 0), null);
  assert.throws(() => parseGrant(['x', '1'], 1000, 0), UncertainError);
});

test('the fencing rule and tokens', () => {
  check('r', 5n, 5n);
  check('r', 6, '5');
  assert.throws(() => check('r', 4n, 5n), (e) => e instanceof StaleTokenError
    && e.resource === 'r' && e.token === 4n && e.highest === 5n);
  assert.equal(toToken('18446744073709551615'), (1n << 64n) - 1n);
  assert.throws(() => toToken(-1n), TokenRangeError);
  assert.throws(() => toToken(1n << 64n), TokenRangeError);
  assert.throws(() => toToken(2 ** 60), TokenRangeError);
  assert.throws(() => toToken('1e3'), TokenRangeError);
});

test('client options are checked', () => {
  assert.throws(() => new Client([]), InvalidArgumentError);
  assert.throws(() => new Client(['nohost']), InvalidArgumentError);
  assert.throws(() => new Client(['h:1'], { requestTimeout: 0 }), InvalidArgumentError);
  assert.throws(() => new Client(['h:1'], { drift: 0.5 }), InvalidArgumentError);
  assert.throws(() => new Client(['h:1'], { auth: { username: 'u', password: '' } }), InvalidArgumentError);
  const c = new Client(['h:1', 'h:1', '[::1]:2']);
  assert.deepEqual(c.addresses, ['h:1', '[::1]:2']);
  c.close();
});
