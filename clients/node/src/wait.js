// Waiting for a lock in the server's FIFO queue (FENCE.ACQUIRE ... WAIT),
// each wait on a connection of its own (the Go client's wait.go is the
// reference).

import { LockedError, NoLeaderError, UncertainError, classify } from './errors.js';
import { millis, parseGrant, releaseLater } from './grant.js';
import { ConnectFailure, jitter, minBackoff, now, settle } from './util.js';

// maxRound caps one wait whatever the TTL, so that a long TTL does not pin
// a request to one node for long (and stays below the server's --max-wait).
const maxRound = 30000;
// minRound is the shortest wait the client falls back to when the server
// refuses longer ones.
const minRound = 100;

/** roundLength is how long one wait lasts: half the TTL, so that a grant
 * arriving at the very end of a wait still has half its validity, counted
 * from before the request was sent. */
function roundLength(ttl) {
  return Math.max(Math.min(ttl / 2, maxRound), 1);
}

/** Results is a queue of round results that the waiting loop takes from. */
class Results {
  items = [];
  wake = () => {};
  push(r) {
    this.items.push(r);
    this.wake();
  }
  /** next resolves when a result is queued (or at once if one is). */
  next() {
    if (this.items.length > 0) return Promise.resolve();
    return new Promise((resolve) => { this.wake = resolve; });
  }
}

/**
 * waitAcquire queues for name on the server and returns the grant, or
 * throws LockedError when deadline (on now()'s clock) passes first, or the
 * signal's reason when it aborts. Waits are issued in overlapping rounds:
 * a new round starts halfway through the current one, and the server puts
 * it in the older one's place in the line (one waiter per key and owner),
 * answering the older one null. So the place in the queue is kept while no
 * single wait lasts longer than half the TTL. There is no polling: a round
 * ends early only if it is granted or replaced.
 *
 * Each round runs on a connection of its own, so that a wait never holds
 * up the shared connection (renewals of other leases); it is closed when
 * the caller gives up, which takes the waiter out of the server's queue at
 * once.
 */
export async function waitAcquire(client, name, owner, ttl, deadline, signal) {
  let round = roundLength(ttl);
  const results = new Results();
  const rounds = new Set(); // AbortControllers of rounds in flight
  let latest = 0;
  const start = () => {
    const wait = Math.min(round, deadline - now());
    if (wait < 1) return false;
    const id = ++latest;
    const ac = new AbortController();
    rounds.add(ac);
    // Rounds outlive this call on purpose after a grant: a round still in
    // flight can only renew the same lease, and cutting it off could make
    // the server revoke a grant it was delivering. They end within their
    // wait plus the request timeout, or when the client closes.
    client.track((async () => {
      let node;
      try {
        node = await client.pick(ac.signal);
        const began = now();
        const g = await waitRound(client, node, name, owner, ttl, wait, ac.signal);
        results.push({ id, node, g, early: !g && now() - began < wait - wait / 10 });
      } catch (err) {
        results.push({ id, node, err });
      } finally {
        rounds.delete(ac);
      }
    })());
    return true;
  };
  const giveUp = (err) => {
    for (const ac of rounds) ac.abort();
    releaseLater(client, name, owner);
    return err;
  };

  start();
  let nextAt = now() + round / 2; // when to start the next round
  let failedSince;
  let last;
  let uncertain = false;
  let failures = 0;
  let refusals = 0;
  for (;;) {
    let timer;
    const tick = new Promise((resolve) => { timer = setTimeout(resolve, Math.max(0, Math.min(nextAt, deadline) - now())); });
    try {
      await settle(Promise.race([results.next(), tick]), Infinity, [signal, client.closed]);
    } catch (e) {
      throw giveUp(e);
    } finally {
      clearTimeout(timer);
    }
    if (results.items.length === 0) {
      if (now() >= deadline) {
        if (uncertain) throw giveUp(new UncertainError(`acquire ${JSON.stringify(name)}: the wait ran out while an attempt's outcome was unknown (last error: ${last?.message})`, { cause: last }));
        if (last) throw giveUp(new NoLeaderError(`acquire ${JSON.stringify(name)}: the wait ran out while failing (last error: ${last.message})`, { cause: last }));
        throw giveUp(new LockedError(`${JSON.stringify(name)} was not granted within the wait`));
      }
      if (now() >= nextAt) {
        // The latest round was not refused at once.
        refusals = 0;
        start();
        nextAt = now() + round / 2;
      }
      continue;
    }
    const r = results.items.shift();
    if (!r.err && r.g) return r.g;
    if (r.id !== latest) continue; // replaced by a newer round, or failed after it started
    if (!r.err && r.early) {
      // Answered null at once, not after waiting. Twice in a row, that is
      // a refusal: the server remembers this owner's release of the lock.
      // Once can also be an older wait of ours taking this one's place, if
      // a node re-sent it after a leader change.
      if (++refusals >= 2) throw giveUp(new LockedError(`${JSON.stringify(name)}: the server refused owner ${owner}`));
      start();
      nextAt = now() + round / 2;
      continue;
    }
    if (!r.err) {
      // The wait ran out before a newer one took its place (a slow link,
      // or the place was lost in a leader change): queue again at once.
      failedSince = undefined;
      failures = 0;
      last = undefined;
      uncertain = false;
      start();
      nextAt = now() + round / 2;
      continue;
    }
    const f = classify(r.err instanceof ConnectFailure ? r.err.cause : r.err, !(r.err instanceof ConnectFailure));
    if (f.argument === 'wait' && round > minRound) {
      // The server allows shorter waits (fencerd --max-wait).
      round = Math.max(round / 2, minRound);
      start();
      nextAt = now() + round / 2;
      continue;
    }
    if (!f.transient) throw giveUp(f.error);
    last = f.error;
    uncertain ||= f.unknown;
    if (r.node) client.failed(r.node, f.leader);
    if (failedSince === undefined) {
      failedSince = now();
    } else if (now() - failedSince >= client.cfg.failoverTimeout) {
      throw giveUp(uncertain
        ? new UncertainError(`acquire ${JSON.stringify(name)}: outcome unknown (last error: ${last.message})`, { cause: last })
        : new NoLeaderError(`acquire ${JSON.stringify(name)}: no leader reachable (last error: ${last.message})`, { cause: last }));
    }
    failures++;
    if (failures % client.nodes.length === 0) {
      // Every node failed once more: pause before the next round.
      nextAt = now() + jitter(Math.min(minBackoff * 2 ** Math.min(failures / client.nodes.length, 8), 1000));
      continue;
    }
    start();
    nextAt = now() + round / 2;
  }
}

/**
 * waitRound sends one FENCE.ACQUIRE ... WAIT to node on a connection of
 * its own, closed when it ends or signal aborts (the server then drops the
 * waiter). Returns the grant, or null.
 */
async function waitRound(client, node, name, owner, ttl, wait, signal) {
  const timeout = client.cfg.requestTimeout;
  const t0 = now();
  let conn;
  const opening = node.connect(timeout);
  try {
    conn = await settle(opening, timeout, [signal, client.closed]);
  } catch (e) {
    // Given up on (aborted, timed out) while opening: the connection may
    // still open, and nothing else would close it.
    opening.then((r) => r.disconnect(), () => {});
    if (e === signal.reason || e === client.closed.reason || e instanceof ConnectFailure) throw e;
    throw new ConnectFailure(e);
  }
  const hangUp = () => conn.disconnect();
  signal.addEventListener('abort', hangUp, { once: true });
  client.closed.addEventListener('abort', hangUp, { once: true });
  try {
    const sent = now();
    const reply = await settle(
      conn.call('FENCE.ACQUIRE', name, owner, millis(ttl), 'WAIT', millis(wait)),
      wait + timeout - (sent - t0), [signal, client.closed]);
    return parseGrant(reply, ttl, sent);
  } finally {
    signal.removeEventListener('abort', hangUp);
    client.closed.removeEventListener('abort', hangUp);
    conn.disconnect();
  }
}
