// Leases: acquire, the lease's validity, renewal, release (the Go client's
// lease.go is the reference).

import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import {
  AuthError, ClosedError, InvalidArgumentError, LeaseLostError, LockedError, NoPermError, ReleasedError,
  TLSError,
} from './errors.js';
import { anySignal, jitter, minBackoff, now, sleep } from './util.js';
import { millis, parseGrant, release, releaseLater } from './grant.js';
import { waitAcquire } from './wait.js';

/** defaultTTL is the TTL of leases, redsync's default expiry. */
export const defaultTTL = 8000;
// driftFloor is added to every drift allowance, as redsync does.
const driftFloor = 2;
// minRenewAttempt is the shortest timeout a renewal attempt gets while the
// lease has that much validity left.
const minRenewAttempt = 200;

/** randomOwner is 16 random bytes in hex: an owner serves one lease only. */
function randomOwner() {
  return randomBytes(16).toString('hex');
}

/** Lease is a granted lock: its fencing token, and a signal that aborts
 * when the lease ends. Pass `token` to the storage the lock protects with
 * every write, and let the storage refuse a token lower than one it has
 * seen: a lease can end without its holder noticing in time (a pause, a
 * partition), and only the token keeps such a holder's writes out. */
export class Lease {
  #client;
  #ttl;
  #drift;
  #sent; // now() before the last request that granted or extended the lease
  #until; // client-side validity end, on now()'s clock
  #timer;
  #controller = new AbortController();
  #renewing = Promise.resolve();
  #released = false;
  #releasing; // the release in progress, so that calls share it

  /** @internal */
  constructor(client, name, owner, grant, drift, autoRenew) {
    this.#client = client;
    /** The lock's name. */
    this.name = name;
    /** The owner value the lease was granted to. */
    this.owner = owner;
    /** The fencing token: larger than every earlier grant's of the lock. A
     * bigint, because tokens are uint64 and a number is exact only to 2^53.
     * It does not change when the lease is extended. */
    this.token = grant.token;
    this.#ttl = grant.ttl;
    this.#drift = drift;
    this.#sent = grant.sent;
    this.#until = grant.sent + grant.ttl - drift;
    this.#timer = setTimeout(() => this.#expire(), this.#until - now());
    // The renewals, extends and releases in flight listen on the signal,
    // and so may any number of the caller's tasks: no limit.
    setMaxListeners(0, this.signal);
    const onClose = () => this.#end(client.closed.reason);
    client.closed.addEventListener('abort', onClose, { once: true });
    this.signal.addEventListener('abort', () => {
      clearTimeout(this.#timer);
      client.closed.removeEventListener('abort', onClose);
    }, { once: true });
    if (autoRenew) {
      this.#renewing = this.#renewLoop();
      client.track(this.#renewing);
    }
  }

  /** An AbortSignal aborted when the lease ends: lost (reason a
   * LeaseLostError), released (ReleasedError), or the client closed
   * (ClosedError). Run the work the lease protects under it. */
  get signal() {
    return this.#controller.signal;
  }

  /** The lease's time to live, in ms. */
  get ttl() {
    return this.#ttl;
  }

  /** The end of the lease's validity as the client counts it: from just
   * before it sent the request that granted or last extended the lease,
   * the TTL less a drift allowance. The server frees the lock no earlier. */
  get validUntil() {
    return new Date(Date.now() + (this.#until - now()));
  }

  /** The validity left, in ms (0 once it has run out or the lease ended). */
  get remaining() {
    return this.signal.aborted ? 0 : Math.max(0, this.#until - now());
  }

  #end(reason) {
    if (!this.signal.aborted) this.#controller.abort(reason);
  }

  #expire() {
    const left = this.#until - now();
    if (left > 0) {
      this.#timer = setTimeout(() => this.#expire(), left); // extended meanwhile
      return;
    }
    this.#end(new LeaseLostError(`lease on ${JSON.stringify(this.name)}: its validity ran out (at ${new Date().toISOString()}) before a renewal succeeded`));
  }

  /** #valid records a successful extend sent at sent. Every extend asks
   * for the same TTL, so the latest one sent ends the server's lease last,
   * and the validity only moves later. */
  #valid(sent) {
    if (this.signal.aborted || sent <= this.#sent) return;
    this.#sent = sent;
    this.#until = sent + this.#ttl - this.#drift;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#expire(), this.#until - now());
  }

  /** #attemptTimeout bounds one renewal attempt. With other nodes to try,
   * an attempt gets half the validity left (at least minRenewAttempt of
   * it), so that a node that hangs leaves time for the next; with one
   * node, a retry could only go to the same node, and a slow reply is
   * still worth having, so it gets all of it. */
  #attemptTimeout() {
    const left = this.#until - now();
    const rt = this.#client.cfg.requestTimeout;
    if (this.#client.nodes.length === 1) return Math.min(rt, left);
    return Math.min(rt, Math.max(left / 2, Math.min(left, minRenewAttempt)));
  }

  /**
   * extend renews the lease for its TTL from now, retrying transient
   * failures on the other addresses until signal aborts or the validity
   * runs out. It throws a LeaseLostError, and aborts the lease's signal, if
   * the server says the owner no longer holds the lock.
   *
   * There is no TTL per call, as in the Go client: with extends of
   * different TTLs in flight, the one the server applies last could end
   * its lease before the end the client counts from another, and the
   * renewal schedule (TTL/3) would not follow the change either.
   * @param {{signal?: AbortSignal}} [opts]
   */
  async extend(opts = {}, ...rest) {
    if (typeof opts !== 'object' || opts === null || rest.length > 0) {
      throw new InvalidArgumentError('extend takes no TTL: a lease renews for the TTL it was acquired with', { argument: 'ttl' });
    }
    if (this.signal.aborted) throw this.signal.reason;
    let res;
    try {
      res = await this.#client.exchange(
        { attempt: () => this.#attemptTimeout(), signal: anySignal(opts.signal, this.signal) },
        'FENCE.EXTEND', this.name, this.owner, millis(this.#ttl));
    } catch (e) {
      if (this.signal.aborted) throw this.signal.reason;
      throw e;
    }
    if (String(res.reply) !== '1') {
      this.#end(new LeaseLostError(`the server says owner ${this.owner} no longer holds ${JSON.stringify(this.name)}`, { code: 'EXTEND 0' }));
      throw this.signal.reason;
    }
    this.#valid(res.sent);
  }

  /** #renewLoop extends the lease about every TTL/3 until it ends. */
  async #renewLoop() {
    for (;;) {
      try {
        await sleep(this.#sent + this.#ttl / 3 - now(), [this.signal]);
        await this.extend();
      } catch {
        if (this.signal.aborted) return;
        // No verdict, and the lease is still valid: the validity timer
        // ends it unless a later renewal succeeds.
        try {
          await sleep(jitter(4 * minBackoff), [this.signal]);
        } catch {
          return;
        }
      }
    }
  }

  /**
   * release ends the lease: it aborts the signal (reason ReleasedError),
   * stops renewals, and frees the lock on the server, handing it to the
   * first waiter. It retries transient failures on the other addresses.
   * It throws a LeaseLostError if the server says the owner no longer held
   * it. Calling it again after it succeeded (or after that verdict) does
   * nothing.
   * @param {{signal?: AbortSignal}} [opts]
   */
  async release(opts = {}) {
    while (this.#releasing) {
      try {
        await this.#releasing;
      } catch { /* this call tries again, unless it was settled */ }
      if (this.#released) return;
    }
    if (this.#released) return;
    this.#releasing = this.#release(opts);
    try {
      await this.#releasing;
    } finally {
      this.#releasing = undefined;
    }
  }

  async #release(opts) {
    // Abort first, so that work under the lease stops before another owner
    // can be granted the lock.
    this.#end(new ReleasedError(`lease on ${JSON.stringify(this.name)} released`));
    await this.#renewing;
    const ok = await release(this.#client, this.name, this.owner, opts.signal);
    this.#released = true;
    if (!ok) throw new LeaseLostError(`the server says owner ${this.owner} no longer held ${JSON.stringify(this.name)}`);
  }
}

function checkTTL(ttl, drift) {
  if (!Number.isFinite(ttl) || ttl < 1 || ttl <= drift) {
    throw new InvalidArgumentError(`ttl ${ttl} is too short`, { argument: 'ttl' });
  }
}

/**
 * acquireLease gets name for a fresh owner, waiting up to opts.wait ms
 * (default: until granted or opts.signal aborts) in the server's queue.
 * A grant arrives with part of its validity left, or acquire fails.
 */
export async function acquireLease(client, name, opts = {}) {
  const ttl = opts.ttl ?? defaultTTL;
  const wait = opts.wait ?? Infinity;
  const drift = ttl * client.cfg.drift + driftFloor;
  if (typeof name !== 'string' || name === '') throw new InvalidArgumentError('empty lock name', { argument: 'key' });
  checkTTL(ttl, drift);
  if (!(wait >= 0)) throw new InvalidArgumentError(`wait ${wait} is negative`, { argument: 'wait' });
  const owner = opts.owner ?? randomOwner();
  const deadline = now() + wait;
  const signal = opts.signal;

  let g;
  try {
    const { reply, sent } = await client.exchange({ ...client.standard(), signal }, 'FENCE.ACQUIRE', name, owner, millis(ttl));
    g = parseGrant(reply, ttl, sent);
  } catch (e) {
    if (!(e instanceof InvalidArgumentError || e instanceof ClosedError || e instanceof AuthError
      || e instanceof NoPermError || e instanceof TLSError)) {
      releaseLater(client, name, owner);
    }
    throw e;
  }
  if (!g && wait > 0) g = await waitAcquire(client, name, owner, ttl, deadline, signal);
  if (!g) throw new LockedError(`${JSON.stringify(name)} is held by another owner`);
  if (g.sent + g.ttl - drift <= now()) {
    // The grant took longer than its validity to arrive: renew it, which
    // counts from now, or give it up.
    try {
      const { reply, sent } = await client.exchange({ ...client.standard(), signal }, 'FENCE.EXTEND', name, owner, millis(ttl));
      if (String(reply) !== '1' || sent + g.ttl - drift <= now()) throw new Error('late');
      g.sent = sent;
    } catch {
      releaseLater(client, name, owner);
      throw new LeaseLostError(`acquire ${JSON.stringify(name)}: the grant arrived after its validity ended`);
    }
  }
  return new Lease(client, name, owner, g, drift, opts.autoRenew ?? false);
}
