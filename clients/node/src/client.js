// The Client: its nodes, their connections, and how one request is sent
// and retried across them (the Go client's client.go is the reference).

import { setMaxListeners } from 'node:events';
import { Redis } from 'ioredis';
import {
  AuthError, ClosedError, FencerError, InvalidArgumentError, NoLeaderError, TLSError, UncertainError, classify,
} from './errors.js';
import { acquireLease } from './lease.js';
import { ConnectFailure, TimeoutFailure, jitter, minBackoff, now, settle, sleep } from './util.js';

// Defaults, as the Go client's.
const defaultRequestTimeout = 5000;
const defaultFailoverTimeout = 15000;
const defaultDrift = 0.01;
// Most backoff between rounds of attempts over all nodes.
const maxBackoff = 1000;
// leaderProbeTimeout bounds asking a node who leads.
const leaderProbeTimeout = 1000;

/** splitAddress parses "host:port" (or "[v6]:port"). */
function splitAddress(a) {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(a);
  if (!m) throw new InvalidArgumentError(`address ${JSON.stringify(a)}: want host:port`);
  const port = Number(m[3]);
  if (port < 1 || port > 65535) throw new InvalidArgumentError(`address ${JSON.stringify(a)}: port out of range`);
  return { host: m[1] ?? m[2], port };
}

/** Node is one address: its shared connection (renewals, releases, reads)
 * and the dedicated connections that waiting acquires open. */
class Node {
  /** @param {Client} client @param {string} addr */
  constructor(client, addr) {
    this.client = client;
    this.addr = addr;
    Object.assign(this, splitAddress(addr));
    /** @type {Promise<Redis>|undefined} the shared connection, once asked for */
    this.shared = undefined;
    /** @type {Set<Redis>} every open connection, closed by Client.close */
    this.open = new Set();
  }

  /** conn returns the shared connection, opening it if it is not open. */
  conn(timeout) {
    if (!this.shared) {
      const p = this.connect(timeout);
      this.shared = p;
      p.then((r) => r.once('end', () => { if (this.shared === p) this.shared = undefined; }),
        () => { if (this.shared === p) this.shared = undefined; });
    }
    return this.shared;
  }

  /** drop closes the shared connection if it is still conn: after a
   * timeout it may hang (a paused node), and the next request opens a
   * fresh one. Requests still on it fail and are retried. */
  drop(conn) {
    this.shared?.then((r) => {
      if (r === conn) {
        this.shared = undefined;
        r.disconnect();
      }
    }, () => {});
  }

  /**
   * connect opens a new connection and authenticates it. Failures are
   * ConnectFailures (nothing was sent), or AuthError/TLSError.
   * @param {number} timeout
   * @returns {Promise<Redis>}
   */
  async connect(timeout) {
    const cfg = this.client.cfg;
    const r = new Redis({
      host: this.host,
      port: this.port,
      lazyConnect: true,
      // Fail at once when the connection is down; the client retries
      // itself, on another node.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableReadyCheck: false,
      autoResubscribe: false,
      // Tokens are uint64: integer replies come as decimal strings, read
      // with BigInt, so that none is rounded to a double.
      stringNumbers: true,
      connectTimeout: timeout,
      tls: cfg.tls,
    });
    let lastError;
    r.on('error', (e) => { lastError = e; });
    this.open.add(r);
    r.once('end', () => this.open.delete(r));
    if (this.client.closed.aborted) {
      r.disconnect();
      throw this.client.closed.reason;
    }
    try {
      await settle(r.connect(), timeout, [this.client.closed]);
    } catch (e) {
      r.disconnect();
      const cause = lastError ?? e;
      const f = classify(cause, false);
      if (!f.transient || e instanceof ClosedError) throw e instanceof ClosedError ? e : f.error;
      throw new ConnectFailure(cause);
    }
    if (cfg.auth) {
      // AUTH before any other command, as fencerd requires with
      // --requirepass or --users; "default" is --requirepass's user.
      const args = cfg.auth.username ? [cfg.auth.username, cfg.auth.password] : [cfg.auth.password];
      try {
        await settle(r.call('AUTH', ...args), timeout, [this.client.closed]);
      } catch (e) {
        r.disconnect();
        const f = classify(e, false);
        if (!f.transient) throw f.error;
        throw new ConnectFailure(e);
      }
    }
    return r;
  }
}

/** Client talks to a fencer cluster through any subset of its nodes'
 * client addresses. Every node accepts every command (followers forward to
 * the leader), so one address is enough while that node is up; give
 * several to survive its loss. Create one and share it. */
export class Client {
  /**
   * @param {string|string[]} addresses host:port client addresses
   * @param {object} [opts] see index.d.ts ClientOptions
   */
  constructor(addresses, opts = {}) {
    const addrs = typeof addresses === 'string' ? [addresses] : [...(addresses ?? [])];
    const cfg = {
      requestTimeout: opts.requestTimeout ?? defaultRequestTimeout,
      failoverTimeout: opts.failoverTimeout ?? defaultFailoverTimeout,
      drift: opts.drift ?? defaultDrift,
      auth: opts.auth,
      tls: opts.tls === true ? {} : opts.tls || undefined,
    };
    if (addrs.length === 0) throw new InvalidArgumentError('no addresses');
    if (!(cfg.requestTimeout > 0)) throw new InvalidArgumentError(`requestTimeout ${cfg.requestTimeout} is not positive`);
    if (!(cfg.failoverTimeout > 0)) throw new InvalidArgumentError(`failoverTimeout ${cfg.failoverTimeout} is not positive`);
    if (!(cfg.drift >= 0 && cfg.drift < 0.5)) throw new InvalidArgumentError(`drift ${cfg.drift} is outside [0, 0.5)`);
    if (cfg.auth && !cfg.auth.password) throw new InvalidArgumentError('auth needs a password');
    this.cfg = cfg;
    /** @type {Node[]} */
    this.nodes = [];
    for (const a of new Set(addrs)) this.nodes.push(new Node(this, a));
    this.cur = 0; // index of the node requests go to
    this.probe = this.nodes.length > 1; // ask the current node who leads first
    this.closer = new AbortController();
    /** aborted (reason ClosedError) by close */
    this.closed = this.closer.signal;
    // Every lease and every request in flight listens on it: no limit.
    setMaxListeners(0, this.closed);
    /** @type {Set<Promise<unknown>>} background work: renewals, clean-up releases, wait rounds */
    this.background = new Set();
  }

  /** addresses returns the addresses the client was given, without duplicates. */
  get addresses() {
    return this.nodes.map((n) => n.addr);
  }

  /**
   * acquire waits for the lock name in the server's FIFO queue (no
   * polling) and returns a Lease with a fresh random owner. opts.wait
   * bounds the wait in ms (default: until granted or opts.signal aborts;
   * 0: do not wait). Throws LockedError when the wait runs out, the
   * signal's reason when it aborts.
   * @param {string} name
   * @param {import('../index.js').AcquireOptions} [opts]
   */
  acquire(name, opts = {}) {
    return acquireLease(this, name, opts);
  }

  /** tryAcquire is acquire without waiting: LockedError at once if another
   * owner holds the lock. */
  tryAcquire(name, opts = {}) {
    return acquireLease(this, name, { ...opts, wait: 0 });
  }

  /** track keeps p as background work that close waits for. */
  track(p) {
    const q = p.catch(() => {}).finally(() => this.background.delete(q));
    this.background.add(q);
  }

  /** close ends every lease (their signals abort with a ClosedError; the
   * server frees them when their TTL passes) and closes every connection.
   * Release leases first to free them at once. */
  async close() {
    if (!this.closed.aborted) this.closer.abort(new ClosedError('client closed'));
    for (const n of this.nodes) for (const r of n.open) r.disconnect();
    while (this.background.size > 0) await Promise.all([...this.background]);
    for (const n of this.nodes) for (const r of n.open) r.disconnect();
  }

  /**
   * pick returns the node to send the next request to. After a failure
   * (and at first use) it asks that node who leads, and moves to the leader
   * if it is one of the client's addresses, saving the forwarding hop. The
   * question ends when signal aborts (throwing its reason), so that a
   * request given up on, such as a renewal of a lease being released, does
   * not wait for a node that hangs.
   * @param {AbortSignal} [signal]
   * @returns {Promise<Node>}
   */
  async pick(signal) {
    const n = this.nodes[this.cur];
    if (!this.probe) return n;
    this.probe = false;
    const timeout = Math.min(leaderProbeTimeout, this.cfg.requestTimeout);
    const deadline = now() + timeout;
    const signals = [signal, this.closed];
    let v;
    try {
      const r = await settle(n.conn(timeout), timeout, signals);
      v = await settle(r.call('FENCE.LEADER'), deadline - now(), signals);
    } catch (e) {
      if (e === signal?.reason || e === this.closed.reason) {
        if (this.nodes[this.cur] === n) this.probe = true; // not answered: ask next time
        throw e;
      }
      if (e instanceof AuthError || e instanceof TLSError) throw e;
      return n;
    }
    if (!Array.isArray(v) || v.length !== 2) return n;
    const l = this.nodeAt(String(v[1]));
    if (l && this.nodes[this.cur] === n) this.cur = this.nodes.indexOf(l);
    return this.nodes[this.cur];
  }

  /** failed moves requests off n after a transient failure: to the leader
   * the node named, if the client knows that address, else to the next. */
  failed(n, leader) {
    if (this.nodes[this.cur] !== n) return; // moved already
    const l = this.nodeAt(leader);
    if (l && l !== n) {
      this.cur = this.nodes.indexOf(l);
      return;
    }
    this.cur = (this.cur + 1) % this.nodes.length;
    this.probe = this.nodes.length > 1;
  }

  nodeAt(addr) {
    if (!addr) return undefined;
    return this.nodes.find((n) => n.addr === addr);
  }

  /** standard is the retry policy of one-off requests. */
  standard() {
    return { attempt: () => this.cfg.requestTimeout, failover: this.cfg.failoverTimeout };
  }

  /**
   * exchange sends args to the current node and returns the reply (null
   * for a null reply) and the time (now()) just before the attempt that
   * produced it was sent. Transient failures are retried on the next node,
   * and after a round over all nodes with a growing pause, until signal
   * aborts or the policy says stop. Only commands that are safe to repeat
   * may go through it. Giving up throws an UncertainError if an attempt's
   * outcome was unknown, else a NoLeaderError.
   * @param {{attempt: () => number, failover?: number, signal?: AbortSignal}} p
   * @param {...(string|number|bigint|Buffer)} args
   * @returns {Promise<{reply: any, sent: number}>}
   */
  async exchange(p, ...args) {
    const start = now();
    let backoff = minBackoff;
    let last;
    let uncertain = false;
    const giveUp = () => unavailable(last, uncertain);
    for (let tries = 1; ; tries++) {
      if (this.closed.aborted) throw this.closed.reason;
      if (p.signal?.aborted) throw p.signal.reason;
      const timeout = p.attempt();
      if (!(timeout > 0)) throw giveUp();
      const n = await this.pick(p.signal);
      const sent = now();
      let f;
      try {
        return { reply: await this.attempt(n, timeout, args, p.signal), sent };
      } catch (e) {
        if (e === p.signal?.reason || e === this.closed.reason) throw e;
        f = classify(e instanceof ConnectFailure ? e.cause : e, !(e instanceof ConnectFailure));
        if (!f.transient) throw f.error;
      }
      last = f.error;
      uncertain ||= f.unknown;
      this.failed(n, f.leader);
      if (p.failover && now() - start >= p.failover) throw giveUp();
      if (tries % this.nodes.length === 0) {
        let pause = jitter(backoff);
        if (p.failover) pause = Math.min(pause, p.failover - (now() - start));
        await sleep(pause, [p.signal, this.closed]);
        backoff = Math.min(2 * backoff, maxBackoff);
        if (p.failover && now() - start >= p.failover) throw giveUp();
      }
    }
  }

  /**
   * attempt sends one command to n on its shared connection. A timeout
   * closes that connection (the node may hang), failing what else is in
   * flight on it: those requests are retried like this one.
   */
  async attempt(n, timeout, args, signal) {
    const t0 = now();
    let r;
    try {
      r = await settle(n.conn(timeout), timeout, [signal, this.closed]);
    } catch (e) {
      if (e === signal?.reason || e === this.closed.reason || e instanceof FencerError || e instanceof ConnectFailure) throw e;
      throw new ConnectFailure(e);
    }
    try {
      return await settle(r.call(...args.map(String)), timeout - (now() - t0), [signal, this.closed]);
    } catch (e) {
      if (e instanceof TimeoutFailure) n.drop(r);
      throw e;
    }
  }
}

/** unavailable is the error of a request that gave up on transient
 * failures: UncertainError if any attempt's outcome was unknown, since a
 * later NOLEADER does not undo it. */
function unavailable(last, uncertain) {
  const detail = last ? ` (last error: ${last.message})` : '';
  if (uncertain) return new UncertainError(`outcome unknown: no node settled it in time${detail}`, { cause: last });
  return new NoLeaderError(`no leader reachable${detail}`, { cause: last });
}
