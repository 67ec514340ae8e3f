// AUTH (fencerd --requirepass, --users) and TLS (--tls-cert-file with a
// self-signed certificate made here with openssl).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AuthError, Client, NoPermError, TLSError } from '../src/index.js';
import { startFencerd, tempDir } from './harness.js';

function client(t, addrs, opts) {
  const c = new Client(addrs, opts);
  t.after(() => c.close());
  return c;
}

test('AUTH: --requirepass and a users file', async (t) => {
  const dir = tempDir(t);
  const users = join(dir, 'users');
  writeFileSync(users, 'app apppass-0123456789 app:*\n', { mode: 0o600 });
  const d = await startFencerd(t, ['--requirepass', 'sekret-0123456789', '--users', users], { connect: { password: 'sekret-0123456789' } });

  const ok = client(t, [d.addr], { auth: { password: 'sekret-0123456789' } });
  const l = await ok.acquire('anything', { ttl: 2000 });
  // A wait runs on a connection of its own: it authenticates too.
  const w = ok.acquire('anything', { ttl: 2000, wait: 5000 });
  setTimeout(() => l.release(), 300);
  await (await w).release();

  const app = client(t, [d.addr], { auth: { username: 'app', password: 'apppass-0123456789' } });
  await (await app.acquire('app:job', { ttl: 2000 })).release();
  const perm = await app.acquire('billing:job', { ttl: 2000 }).catch((e) => e);
  assert.ok(perm instanceof NoPermError, String(perm));
  assert.equal(perm.code, 'NOPERM');

  // Refused credentials fail at once, without retrying.
  const wrong = client(t, [d.addr], { auth: { password: 'wrong' }, failoverTimeout: 10000 });
  const t0 = Date.now();
  const err = await wrong.acquire('x').catch((e) => e);
  assert.ok(err instanceof AuthError, String(err));
  assert.equal(err.code, 'WRONGPASS');
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0}ms`);
  const none = client(t, [d.addr]);
  const err2 = await none.acquire('x').catch((e) => e);
  assert.ok(err2 instanceof AuthError, String(err2));
  assert.equal(err2.code, 'NOAUTH');
});

test('TLS with a self-signed certificate', async (t) => {
  const dir = tempDir(t);
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const gen = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=fencer-test', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:fencer.test']);
  assert.equal(gen.status, 0, `openssl (apt-get install openssl): ${gen.error?.message ?? gen.stderr}`);
  const ca = readFileSync(cert);
  const d = await startFencerd(t, ['--tls-cert-file', cert, '--tls-key-file', key], { connect: { tls: { ca } } });

  const c = client(t, [d.addr], { tls: { ca } });
  const l = await c.acquire('secure', { ttl: 2000, autoRenew: true });
  assert.ok(l.token > 0n);
  const w = c.acquire('secure', { ttl: 2000, wait: 5000 }); // its own TLS connection
  setTimeout(() => l.release(), 300);
  await (await w).release();

  // A certificate that does not verify fails at once, without retrying.
  const untrusting = client(t, [d.addr], { tls: true, failoverTimeout: 10000 });
  const t0 = Date.now();
  const err = await untrusting.tryAcquire('secure').catch((e) => e);
  assert.ok(err instanceof TLSError, String(err));
  assert.ok(Date.now() - t0 < 3000);
  // The name is checked: the certificate names 127.0.0.1 and fencer.test.
  const wrongName = client(t, [d.addr], { tls: { ca, servername: 'other.test' }, failoverTimeout: 10000 });
  assert.ok((await wrongName.tryAcquire('secure').catch((e) => e)) instanceof TLSError);
});
