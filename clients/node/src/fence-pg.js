// Fenced writes to PostgreSQL through node-postgres (pg), as Go's
// fence/fencesql: a row table whose rows carry their own token, written by
// one conditional upsert; and a tokens table that admits a token inside the
// caller's transaction, for writes one row cannot carry. Anything with
// pg's query(text, values) works: a Pool, a Client, a PoolClient.

import { FencerError } from './errors.js';
import { StaleTokenError, TokenRangeError, toToken } from './fence.js';

const maxBigint = (1n << 63n) - 1n;

/** DefinitionError: a table or column name is empty, or the number of
 * values does not match the columns. */
export class DefinitionError extends FencerError {}

/** quote quotes a possibly schema-qualified identifier: "schema"."table". */
function quote(name) {
  return name.split('.').map((p) => `"${p.replaceAll('"', '""')}"`).join('.');
}

/** bigintParam converts a token for a BIGINT column. */
function bigintParam(token) {
  const t = toToken(token);
  if (t > maxBigint) throw new TokenRangeError(`token ${t} does not fit a BIGINT`);
  return t;
}

/** upsert builds INSERT INTO table (key, token, cols...) VALUES (...) ON
 * CONFLICT (key) DO UPDATE SET token = new token, cols... WHERE stored token
 * <= new token: one statement that inserts the row, or updates it if the
 * token allows, or does nothing (no row affected). */
function upsert(table, key, token, cols) {
  const all = [key, token, ...cols];
  const names = all.map(quote).join(', ');
  const marks = all.map((_, i) => `$${i + 1}`).join(', ');
  const sets = all.slice(1).map((c) => `${quote(c)} = excluded.${quote(c)}`).join(', ');
  return `INSERT INTO ${quote(table)} (${names}) VALUES (${marks}) ON CONFLICT (${quote(key)}) DO UPDATE SET ${sets} `
    + `WHERE ${quote(table)}.${quote(token)} <= excluded.${quote(token)}`;
}

/** fencedWrite runs an upsert and turns "no row affected" into a
 * StaleTokenError, reading the token that refused it with sel. */
async function fencedWrite(db, up, sel, resource, key, token, values) {
  const t = bigintParam(token);
  const res = await db.query(up, [key, t.toString(), ...values]);
  if (res.rowCount > 0) return;
  const r = await db.query(sel, [key]);
  if (r.rows.length === 0) {
    throw new FencerError(`write with token ${t} to ${JSON.stringify(resource)} was refused, and no row holds the token that refused it`);
  }
  throw new StaleTokenError(resource, t, BigInt(String(Object.values(r.rows[0])[0])));
}

/** FencedTable is a table whose rows each carry their own fencing token: a
 * key column (its primary key, or another unique column), a BIGINT token
 * column, and the data columns that write sets. */
export class FencedTable {
  /**
   * Describes table name (may be schema-qualified); does not create it.
   * @param {string} name
   * @param {string} keyColumn
   * @param {string} tokenColumn
   * @param {string[]} columns the data columns write sets, in order
   */
  constructor(name, keyColumn, tokenColumn, columns) {
    for (const n of [name, keyColumn, tokenColumn, ...columns]) {
      if (typeof n !== 'string' || n === '') throw new DefinitionError('empty table or column name');
    }
    this.name = name;
    this.columns = [...columns];
    this.up = upsert(name, keyColumn, tokenColumn, columns);
    this.sel = `SELECT ${quote(tokenColumn)} FROM ${quote(name)} WHERE ${quote(keyColumn)} = $1`;
  }

  /**
   * write inserts the row with key, or updates it if its token column
   * holds at most token, in one statement; values go to the data columns.
   * If the row holds a higher token, nothing changes and write throws a
   * StaleTokenError whose resource is the key as text. db may be a client
   * inside a transaction: the write is then part of it.
   */
  async write(db, key, token, values) {
    if (values.length !== this.columns.length) {
      throw new DefinitionError(`${values.length} values for ${this.columns.length} columns of ${this.name}`);
    }
    await fencedWrite(db, this.up, this.sel, String(key), key, token, values);
  }
}

/** TokenTable keeps the highest admitted token of each resource, for
 * writes a single row cannot carry: several rows or tables, deletions,
 * anything a transaction can do. Its columns are resource (TEXT, primary
 * key) and token (BIGINT), as fencesql.Tokens's. */
export class TokenTable {
  /** @param {string} [name] may be schema-qualified; default fence_tokens */
  constructor(name = 'fence_tokens') {
    if (!name) throw new DefinitionError('empty table name');
    this.name = name;
    this.up = upsert(name, 'resource', 'token', []);
    this.sel = `SELECT "token" FROM ${quote(name)} WHERE "resource" = $1`;
    this.ddl = `CREATE TABLE IF NOT EXISTS ${quote(name)} ("resource" TEXT PRIMARY KEY, "token" BIGINT NOT NULL)`;
  }

  /** createTable creates the table if it does not exist. */
  async createTable(db) {
    await db.query(this.ddl);
  }

  /** admit records token as the highest for resource, inside the caller's
   * transaction on client tx, if it is at least the highest recorded;
   * otherwise it throws a StaleTokenError and the caller must roll back.
   * Admit before the writes it guards: the row it writes stays locked until
   * the transaction ends, so writers of one resource take turns, in token
   * order. */
  async admit(tx, resource, token) {
    await fencedWrite(tx, this.up, this.sel, resource, resource, token, []);
  }

  /**
   * transaction runs fn(client) in a transaction that first admits token
   * for resource, and commits if fn resolves. A stale token, an error from
   * fn or a failed commit rolls everything back and is thrown. db is a
   * pg.Pool (a client is checked out and released) or a connected client.
   * @template T
   * @param {any} db
   * @param {string} resource
   * @param {bigint|number|string} token
   * @param {(client: any) => Promise<T>} fn
   * @returns {Promise<T>}
   */
  async transaction(db, resource, token, fn) {
    const pooled = typeof db.connect === 'function' && 'totalCount' in db;
    const client = pooled ? await db.connect() : db;
    let broken;
    try {
      await client.query('BEGIN');
      try {
        await this.admit(client, resource, token);
        const v = await fn(client);
        await client.query('COMMIT');
        return v;
      } catch (e) {
        await client.query('ROLLBACK').catch((re) => { broken = re; });
        throw e;
      }
    } finally {
      if (pooled) client.release(broken);
    }
  }

  /** highest returns the highest token recorded for resource, or null. */
  async highest(db, resource) {
    const r = await db.query(this.sel, [resource]);
    if (r.rows.length === 0) return null;
    return BigInt(String(r.rows[0].token));
  }
}
