// tokenFor: the fencing token of a lock taken with another client
// (node-redlock, a SET NX), one FENCE.TOKEN away.

import { LeaseLostError, classify } from './errors.js';

/**
 * tokenFor returns the fencing token of value's current grant of key, as
 * a bigint, asking fencer through the caller's own ioredis client (the one
 * node-redlock was given). It throws a LeaseLostError if value does
 * not hold key (the lock expired or was never taken), and the client's
 * error classes for error replies (NoLeaderError, UncertainError, ...).
 *
 * An ioredis client made without `stringNumbers: true` reads integers as
 * doubles: a token above 2^53 then throws a RangeError instead of coming
 * back rounded.
 * @param {any} redis
 * @param {string} key
 * @param {string} value
 * @returns {Promise<bigint>}
 */
export async function tokenFor(redis, key, value) {
  let v;
  try {
    if (typeof redis?.call !== 'function') throw new TypeError('tokenFor: want an ioredis client');
    v = await redis.call('FENCE.TOKEN', key, value);
  } catch (e) {
    if (e instanceof TypeError) throw e;
    throw classify(e, true).error;
  }
  if (v === null || v === undefined) {
    throw new LeaseLostError(`${JSON.stringify(value)} does not hold ${JSON.stringify(key)}`);
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new RangeError(`FENCE.TOKEN replied ${v}, beyond a double's exact integers: make the ioredis client with stringNumbers: true`);
    }
    return BigInt(v);
  }
  const s = Buffer.isBuffer(v) ? v.toString() : String(v);
  if (!/^\d+$/.test(s)) throw new RangeError(`FENCE.TOKEN replied ${JSON.stringify(s)}, not a token`);
  return BigInt(s);
}
