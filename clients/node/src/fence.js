// The fencing rule, as Go's package fence: a write carrying a token is
// admitted if the token is at least the highest already admitted for the
// resource (equal allowed: the same holder writes again), refused
// otherwise.

import { FencerError } from './errors.js';

const maxUint64 = (1n << 64n) - 1n;

/** StaleTokenError reports a refused write: `token` is the token it
 * carried, `highest` the highest token already admitted for `resource`
 * (highest > token). The writer's lease has passed to someone else. */
export class StaleTokenError extends FencerError {
  /**
   * @param {string} resource
   * @param {bigint} token
   * @param {bigint} highest
   */
  constructor(resource, token, highest) {
    super(`fence: stale token ${token} for ${JSON.stringify(resource)}: token ${highest} was already admitted`);
    this.resource = resource;
    this.token = token;
    this.highest = highest;
  }
}

/** TokenRangeError: a token that is not a uint64, or that the store cannot
 * hold (above 2^63-1 for a BIGINT column). */
export class TokenRangeError extends FencerError {}

/**
 * toToken reads a token given as a bigint, a safe integer or a decimal
 * string, and checks it is a uint64.
 * @param {bigint|number|string} t
 * @returns {bigint}
 */
export function toToken(t) {
  let v;
  if (typeof t === 'bigint') v = t;
  else if (typeof t === 'number' && Number.isSafeInteger(t)) v = BigInt(t);
  else if (typeof t === 'string' && /^\d+$/.test(t)) v = BigInt(t);
  else throw new TokenRangeError(`token ${String(t)} is not a uint64 (give a bigint, a decimal string or a safe integer)`);
  if (v < 0n || v > maxUint64) throw new TokenRangeError(`token ${v} is not a uint64`);
  return v;
}

/**
 * check is the fencing rule: it throws a StaleTokenError if token is below
 * highest, the highest token admitted for resource so far (0n if none).
 * @param {string} resource
 * @param {bigint|number|string} token
 * @param {bigint|number|string} highest
 */
export function check(resource, token, highest) {
  const t = toToken(token);
  const h = toToken(highest);
  if (t < h) throw new StaleTokenError(resource, t, h);
}
