// Grants: what the lease (lease.js) and the wait in the server's queue
// (wait.js) share: the wire form of a duration, the reply to FENCE.ACQUIRE,
// and releasing a grant whose outcome the caller gave up on.

import { UncertainError } from './errors.js';
import { sleep } from './util.js';

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

/** releaseAgain is the pauses (ms) before each repeat of a background
 * release that the server answered "not held". Such a release may have come
 * before a grant to the same owner still on its way: a request sent on a
 * connection since closed, or a hand-off to a wait whose connection the
 * server has not yet seen close. fencerd neither remembers a release by an
 * owner that does not hold the lock nor drops the owner's waits for it, so
 * the release is sent again for about a second (as the Python clients do). */
export const releaseAgain = [50, 100, 200, 400];

/** releaseLater releases name for owner in the background, for an acquire
 * whose outcome is unknown: the release is remembered by the server, so a
 * late grant cannot outlive the caller who gave up on it. */
export function releaseLater(client, name, owner) {
  if (client.closed.aborted) return;
  client.track((async () => {
    for (const pause of [...releaseAgain, null]) {
      if (await release(client, name, owner)) return;
      if (pause === null || client.closed.aborted) return;
      await sleep(pause, [client.closed]);
    }
  })());
}
