// Grants: what the lease (lease.js) and the wait in the server's queue
// (wait.js) share: the wire form of a duration, the reply to FENCE.ACQUIRE,
// and releasing a grant whose outcome the caller gave up on.

import { UncertainError } from './errors.js';

/** millis converts a duration for the wire: whole milliseconds, at least 1. */
export function millis(ms) {
  return String(Math.max(Math.floor(ms), 1));
}

/**
 * parseGrant reads the reply to FENCE.ACQUIRE: [token, granted-ttl-ms] or
 * null. Integers arrive as decimal strings (ioredis's stringNumbers).
 * @returns {{token: bigint, ttl: number, sent: number}|null}
 */
export function parseGrant(v, ttl, sent) {
  if (v === null || v === undefined) return null;
  if (!Array.isArray(v) || v.length !== 2 || !/^\d+$/.test(String(v[0])) || !/^\d+$/.test(String(v[1]))) {
    throw new UncertainError(`unexpected reply to FENCE.ACQUIRE: ${JSON.stringify(v)}`);
  }
  const token = BigInt(String(v[0]));
  const ms = Number(v[1]);
  if (token <= 0n || ms <= 0) throw new UncertainError(`unexpected reply to FENCE.ACQUIRE: ${JSON.stringify(v)}`);
  return { token, ttl: Math.min(ttl, ms), sent };
}

/** release frees name if owner holds it; false if the server says owner
 * neither holds it nor released it last. */
export async function release(client, name, owner, signal) {
  const { reply } = await client.exchange({ ...client.standard(), signal }, 'FENCE.RELEASE', name, owner);
  return String(reply) === '1';
}

/** releaseLater releases name for owner in the background, for an acquire
 * whose outcome is unknown: the release is remembered by the server, so a
 * late grant cannot outlive the caller who gave up on it. */
export function releaseLater(client, name, owner) {
  if (client.closed.aborted) return;
  client.track(release(client, name, owner));
}
