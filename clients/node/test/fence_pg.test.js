// FencedTable and TokenTable against a real PostgreSQL, mirroring
// fence/fencesql's tests.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { DefinitionError, FencedTable, TokenRangeError, TokenTable } from '../src/index.js';
import { fileScope, startPostgres } from './harness.js';
import { checkHistory, wantStale, writers } from './fencetest.js';

const scope = fileScope();
let url;
before(async () => { url = await startPostgres(scope); });
after(scope.cleanup);

let dbs = 0;
/** freshDB creates a database of the test's own and returns a pool to it. */
async function freshDB(t) {
  const name = `t${++dbs}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const pool = new pg.Pool({ connectionString: url.replace('/postgres?', `/${name}?`), max: 10 });
  t.after(() => pool.end());
  return pool;
}

test('FencedTable.write: first write, equal admitted, lower refused', async (t) => {
  const db = await freshDB(t);
  await db.query('CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT, rev INT)');
  const docs = new FencedTable('docs', 'id', 'token', ['body', 'rev']);
  await docs.write(db, 'a', 5n, ['five', 1]);
  await docs.write(db, 'a', 5n, ['five again', 2]);
  await wantStale(docs.write(db, 'a', 4n, ['four', 3]), 'a', 4, 5);
  let r = await db.query("SELECT token, body, rev FROM docs WHERE id = 'a'");
  assert.deepEqual(r.rows[0], { token: '5', body: 'five again', rev: 2 });
  await docs.write(db, 'a', '9', ['nine', 4]);
  r = await db.query("SELECT token, body FROM docs WHERE id = 'a'");
  assert.deepEqual(r.rows[0], { token: '9', body: 'nine' });
  await assert.rejects(docs.write(db, 'a', 10n, ['too few']), DefinitionError);
  await assert.rejects(docs.write(db, 'a', 1n << 63n, ['big', 5]), TokenRangeError);
  await docs.write(db, 'a', (1n << 63n) - 1n, ['largest', 5]);
  assert.throws(() => new FencedTable('', 'id', 'token', []), DefinitionError);
  // An integer key; the resource is its text.
  await db.query('CREATE TABLE nums (id INT PRIMARY KEY, token BIGINT NOT NULL, v TEXT)');
  const nums = new FencedTable('nums', 'id', 'token', ['v']);
  await nums.write(db, 1, 3n, ['x']);
  await wantStale(nums.write(db, 1, 2n, ['y']), '1', 2, 3);
});

test('a refused write inside a transaction leaves it usable', async (t) => {
  const db = await freshDB(t);
  await db.query('CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)');
  await db.query('CREATE TABLE notes (note TEXT)');
  const docs = new FencedTable('docs', 'id', 'token', ['body']);
  await docs.write(db, 'a', 7n, ['seven']);
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    await wantStale(docs.write(c, 'a', 6n, ['six']), 'a', 6, 7);
    await c.query("INSERT INTO notes (note) VALUES ('refused 6')");
    await c.query('COMMIT');
  } finally {
    c.release();
  }
  assert.equal((await db.query("SELECT body FROM docs WHERE id = 'a'")).rows[0].body, 'seven');
  assert.equal((await db.query('SELECT note FROM notes')).rows[0].note, 'refused 6');
});

test('TokenTable.transaction admits, commits, and rolls back stale or failed writes', async (t) => {
  const db = await freshDB(t);
  const tokens = new TokenTable();
  await tokens.createTable(db);
  await tokens.createTable(db); // IF NOT EXISTS
  await db.query('CREATE TABLE items (name TEXT)');
  assert.equal(await tokens.highest(db, 'stream'), null);
  const v = await tokens.transaction(db, 'stream', 12n, async (c) => {
    await c.query("INSERT INTO items VALUES ('by 12')");
    return 'done';
  });
  assert.equal(v, 'done');
  assert.equal(await tokens.highest(db, 'stream'), 12n);
  await wantStale(tokens.transaction(db, 'stream', 11n, async (c) => {
    await c.query("INSERT INTO items VALUES ('by 11')");
  }), 'stream', 11, 12);
  // A write that fails rolls back its admission too.
  await assert.rejects(tokens.transaction(db, 'stream', 13n, async (c) => {
    await c.query("INSERT INTO items VALUES ('by 13')");
    throw new Error('boom');
  }), /boom/);
  assert.equal(await tokens.highest(db, 'stream'), 12n);
  await tokens.transaction(db, 'stream', 12n, async (c) => { await c.query("INSERT INTO items VALUES ('by 12 again')"); });
  const items = (await db.query('SELECT name FROM items ORDER BY name')).rows.map((r) => r.name);
  assert.deepEqual(items, ['by 12', 'by 12 again']);
  // A schema-qualified name is quoted part by part; a client works too.
  await db.query('CREATE SCHEMA app');
  const q = new TokenTable('app.fence_tokens');
  await q.createTable(db);
  const c = await db.connect();
  try {
    await q.transaction(c, 'r', 1n, async () => {});
    assert.equal(await q.highest(c, 'r'), 1n);
  } finally {
    c.release();
  }
});

test('FencedTable: concurrent writers end with the newest holder\'s value', async (t) => {
  const db = await freshDB(t);
  await db.query('CREATE TABLE docs (id TEXT PRIMARY KEY, token BIGINT NOT NULL, body TEXT)');
  await db.query('CREATE TABLE landed (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)');
  await db.query(`CREATE FUNCTION log_landing() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO landed (token) VALUES (NEW.token); RETURN NEW; END $$`);
  await db.query('CREATE TRIGGER docs_landed AFTER INSERT OR UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION log_landing()');
  const docs = new FencedTable('docs', 'id', 'token', ['body']);
  const holders = 8;
  const writes = 25;
  const refused = await writers(holders, writes, (token, i) => docs.write(db, 'doc', token, [`holder ${token} write ${i}`]));
  const landed = (await db.query('SELECT token FROM landed ORDER BY seq')).rows.map((r) => BigInt(r.token));
  checkHistory(refused, holders, writes, landed);
  const row = (await db.query("SELECT token, body FROM docs WHERE id = 'doc'")).rows[0];
  assert.equal(row.token, String(holders));
  assert.match(row.body, new RegExp(`^holder ${holders} `));
});

test('TokenTable: concurrent transactions land in token order', async (t) => {
  const db = await freshDB(t);
  const tokens = new TokenTable();
  await tokens.createTable(db);
  await db.query('CREATE TABLE events (seq BIGSERIAL PRIMARY KEY, token BIGINT NOT NULL)');
  await db.query('CREATE TABLE summary (id INT PRIMARY KEY, last_token BIGINT, count BIGINT)');
  await db.query('INSERT INTO summary VALUES (1, 0, 0)');
  const holders = 8;
  const writes = 25;
  const refused = await writers(holders, writes, (token) => tokens.transaction(db, 'stream', token, async (c) => {
    await c.query('INSERT INTO events (token) VALUES ($1)', [token.toString()]);
    await c.query('UPDATE summary SET last_token = $1, count = count + 1', [token.toString()]);
  }));
  const landed = (await db.query('SELECT token FROM events ORDER BY seq')).rows.map((r) => BigInt(r.token));
  checkHistory(refused, holders, writes, landed);
  const s = (await db.query('SELECT last_token, count FROM summary')).rows[0];
  assert.deepEqual(s, { last_token: String(holders), count: String(landed.length) });
});
