// Fenced writes to Redis, as Go's fence/fenceredis: the same Lua script and
// the same key layout, so that Go and Node writers of the same data fence
// each other.

import { createHash } from 'node:crypto';
import { FencerError } from './errors.js';
import { StaleTokenError, toToken } from './fence.js';

// script runs one fenced write. KEYS[1] is the data key and KEYS[2] its
// token key; ARGV[1] is the token in canonical decimal, ARGV[2] the
// operation and the rest its arguments. Tokens are compared as decimal
// strings (length first), because Lua's numbers are doubles and would round
// tokens above 2^53. The write comes before the token is recorded: if the
// write fails (a key of the wrong type), Redis has changed nothing.
// Reply: {1, token} if admitted, {0, highest} if refused.
//
// The text is byte for byte fenceredis.go's (a test compares them), so
// both load one script under one SHA1.
export const script = `
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local highest = redis.call('GET', KEYS[2])
if highest and below(ARGV[1], highest) then
  return {0, highest}
end
local op = ARGV[2]
if op == 'set' then
  if ARGV[4] == '0' then
    redis.call('SET', KEYS[1], ARGV[3])
  else
    redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
elseif op == 'del' then
  redis.call('DEL', KEYS[1])
else
  return redis.error_reply('ERR fenceredis: unknown operation ' .. op)
end
redis.call('SET', KEYS[2], ARGV[1])
return {1, ARGV[1]}
`;

const sha = createHash('sha1').update(script).digest('hex');

/** FencedRedisReplyError: the script answered something this package did
 * not send it to answer (another script under its SHA1, a corrupted token
 * key). */
export class FencedRedisReplyError extends FencerError {}

/** defaultTokenKey names the key that holds key's highest admitted token,
 * as fenceredis does: "fence:{" + key + "}" (the braces keep both keys in
 * one Redis Cluster slot). */
export const defaultTokenKey = (key) => `fence:{${key}}`;

/** FencedRedis runs fenced writes through an ioredis client (to a Redis
 * server that holds the data, not fencer). A write is admitted if its token
 * is at least the highest admitted for the key; check and write are one
 * script, atomic. */
export class FencedRedis {
  /**
   * @param {any} redis an ioredis client (Redis or Cluster)
   * @param {{tokenKey?: (key: string) => string}} [opts]
   */
  constructor(redis, opts = {}) {
    this.redis = redis;
    this.tokenKey = opts.tokenKey ?? defaultTokenKey;
  }

  /** set sets key to value (with an expiry of opts.ttl ms if given) if
   * token is at least key's highest admitted token; else StaleTokenError. */
  async set(key, token, value, opts = {}) {
    const ttl = opts.ttl ?? 0;
    const ms = ttl > 0 ? Math.max(1, Math.floor(ttl)) : 0;
    await this.#run(key, token, 'set', value, String(ms));
  }

  /** hset sets fields of the hash at key (an object, a Map, or
   * [field, value, ...]) if token is at least key's highest admitted token. */
  async hset(key, token, fields) {
    let flat;
    if (Array.isArray(fields)) flat = fields;
    else if (fields instanceof Map) flat = [...fields].flat();
    else flat = Object.entries(fields ?? {}).flat();
    if (flat.length === 0 || flat.length % 2 !== 0) {
      throw new TypeError(`hset needs field and value pairs, got ${flat.length} arguments`);
    }
    await this.#run(key, token, 'hset', ...flat);
  }

  /** del deletes key if token is at least key's highest admitted token. The
   * token is still recorded, so a stale writer cannot recreate the key. */
  async del(key, token) {
    await this.#run(key, token, 'del');
  }

  /** highest returns key's highest admitted token, or null if no fenced
   * write to key was admitted. */
  async highest(key) {
    const v = await this.redis.get(this.tokenKey(key));
    if (v === null) return null;
    if (!/^\d+$/.test(v)) throw new FencedRedisReplyError(`token key ${this.tokenKey(key)} holds ${JSON.stringify(v)}`);
    return BigInt(v);
  }

  async #run(key, token, op, ...args) {
    const t = toToken(token);
    const keys = [key, this.tokenKey(key)];
    const argv = [t.toString(), op, ...args];
    let reply;
    try {
      reply = await this.redis.evalsha(sha, keys.length, ...keys, ...argv);
    } catch (e) {
      if (!String(e?.message).startsWith('NOSCRIPT')) throw e;
      reply = await this.redis.eval(script, keys.length, ...keys, ...argv);
    }
    if (!Array.isArray(reply) || reply.length !== 2 || !/^\d+$/.test(String(reply[1]))) {
      throw new FencedRedisReplyError(`unexpected reply ${JSON.stringify(reply)}`);
    }
    if (Number(reply[0]) === 1) return;
    throw new StaleTokenError(key, t, BigInt(String(reply[1])));
  }
}
