// Types of @fencer/client (hand-written; src/ is the JavaScript it describes).

import type { ConnectionOptions } from 'node:tls';

/** Options of a Client. */
export interface ClientOptions {
  /** Credentials sent with AUTH on every connection, before any command, as
   * fencerd requires with --requirepass (user "default", or no username) or
   * --users. Refused credentials throw AuthError at once. Default: none. */
  auth?: { username?: string; password: string };
  /** TLS to every node (fencerd --tls-cert-file): node:tls connect options
   * (ca for a private CA, cert and key for a client certificate), or true
   * for the system's roots. Default: plain TCP. */
  tls?: ConnectionOptions | boolean;
  /** Bound on one attempt at one node, ms; then the next node is tried. A
   * waiting acquire gets its wait on top. Default 5000. */
  requestTimeout?: number;
  /** How long a request keeps trying the nodes while none can serve it, ms;
   * then NoLeaderError (or UncertainError). Should exceed an election.
   * Renewals are bounded by the lease's validity instead. Default 15000. */
  failoverTimeout?: number;
  /** Clock drift allowance as a fraction of the TTL: a lease counts as
   * valid until TTL × (1 − drift) − 2 ms after the request that granted or
   * extended it was sent. Default 0.01. */
  drift?: number;
}

/** Options of acquire and tryAcquire. */
export interface AcquireOptions {
  /** Time to live of the lease, ms (the server allows 100 ms .. 24 h by
   * default). Default 8000. */
  ttl?: number;
  /** Longest wait in the server's FIFO queue, ms. Default: until granted or
   * signal aborts. 0: do not wait. */
  wait?: number;
  /** Extend the lease about every TTL/3 until it is released or lost.
   * Default false. */
  autoRenew?: boolean;
  /** Abort the acquire (a waiting one leaves the server's queue at once).
   * The acquire then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Owner value sent to the server instead of 16 random bytes in hex. Must
   * be unique per lease. */
  owner?: string;
}

export declare const defaultTTL: number;

/** A client of a fencer cluster, through any subset of its nodes' client
 * addresses (host:port). Safe to share. */
export declare class Client {
  constructor(addresses: string | string[], opts?: ClientOptions);
  /** The addresses given, without duplicates. */
  readonly addresses: string[];
  /** Waits in the server's queue (no polling) and resolves with a Lease.
   * Rejects with LockedError when opts.wait runs out, with the signal's
   * reason when it aborts, UncertainError when the outcome stayed unknown. */
  acquire(name: string, opts?: AcquireOptions): Promise<Lease>;
  /** acquire without waiting: LockedError at once if the lock is held. */
  tryAcquire(name: string, opts?: Omit<AcquireOptions, 'wait'>): Promise<Lease>;
  /** Ends every lease (signals abort with ClosedError) and closes every
   * connection. Release leases first to free them at once. */
  close(): Promise<void>;
}

/** A granted lock. */
export declare class Lease {
  private constructor();
  /** The lock's name. */
  readonly name: string;
  /** The owner value it was granted to. */
  readonly owner: string;
  /** The fencing token: a uint64 as a bigint (a number is exact only to
   * 2^53). Unchanged by extend. */
  readonly token: bigint;
  /** Its time to live, ms. */
  readonly ttl: number;
  /** Aborted when the lease ends; reason: LeaseLostError, ReleasedError or
   * ClosedError. */
  readonly signal: AbortSignal;
  /** End of the validity as the client counts it (before the server's). */
  readonly validUntil: Date;
  /** Validity left, ms; 0 once ended. */
  readonly remaining: number;
  /** Renews for its TTL (the one it was acquired with) from now. Throws
   * LeaseLostError if the server says the owner no longer holds it. */
  extend(opts?: { signal?: AbortSignal }): Promise<void>;
  /** Frees the lock (idempotent). Throws LeaseLostError if the server says
   * the owner no longer held it. */
  release(opts?: { signal?: AbortSignal }): Promise<void>;
}

/** Base class of this package's errors. */
export declare class FencerError extends Error {
  /** The server's error code, when a reply caused it. */
  readonly code?: string;
}
export declare class LockedError extends FencerError {}
export declare class LeaseLostError extends FencerError {}
export declare class ReleasedError extends FencerError {}
export declare class ClosedError extends FencerError {}
export declare class NoLeaderError extends FencerError {}
export declare class UncertainError extends FencerError {}
export declare class InvalidArgumentError extends FencerError {
  /** The argument the server named (key, owner, ttl, wait, ...), if any. */
  readonly argument?: string;
}
export declare class AuthError extends FencerError {}
export declare class NoPermError extends FencerError {}
/** A server run with --redlock-multi-endpoint refused a write of the value whose release is the key's newest it remembers (RELEASED). */
export declare class ValueReleasedError extends FencerError {}
export declare class TLSError extends FencerError {}
export declare class ServerError extends FencerError {}

export declare function parseReply(reply: string): { code: string; text: string };
export declare function parseNotLeader(text: string): { id: string; addr: string } | undefined;
export declare function parseInvalidArgument(text: string): { argument: string; reason: string } | undefined;

/** The part of an ioredis client tokenFor uses. */
export interface CommandClient {
  call(command: string, ...args: (string | Buffer | number)[]): Promise<unknown>;
}

/** The fencing token of value's grant of key, through the caller's Redis
 * client connected to fencer. Throws LeaseLostError if value does not hold key. */
export declare function tokenFor(redis: CommandClient, key: string, value: string): Promise<bigint>;

/** A token as the fence helpers take it. */
export type Token = bigint | number | string;

export declare class StaleTokenError extends FencerError {
  readonly resource: string;
  readonly token: bigint;
  readonly highest: bigint;
}
export declare class TokenRangeError extends FencerError {}
/** The fencing rule: throws StaleTokenError if token < highest. */
export declare function check(resource: string, token: Token, highest: Token): void;
export declare function toToken(t: Token): bigint;

/** The part of an ioredis client FencedRedis uses. */
export interface ScriptClient {
  evalsha(sha: string, numKeys: number, ...args: (string | Buffer | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | Buffer | number)[]): Promise<unknown>;
  get(key: string): Promise<string | null>;
}
export type RedisValue = string | Buffer | number;

export declare class FencedRedisReplyError extends FencerError {}
export declare function defaultTokenKey(key: string): string;
/** Fenced SET/HSET/DEL on a Redis server, as Go's fenceredis (same script,
 * same token keys "fence:{key}"). */
export declare class FencedRedis {
  constructor(redis: ScriptClient, opts?: { tokenKey?: (key: string) => string });
  set(key: string, token: Token, value: RedisValue, opts?: { ttl?: number }): Promise<void>;
  hset(key: string, token: Token, fields: Record<string, RedisValue> | Map<string, RedisValue> | RedisValue[]): Promise<void>;
  del(key: string, token: Token): Promise<void>;
  highest(key: string): Promise<bigint | null>;
}

/** What pg's Pool, Client and PoolClient have in common. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: any[] }>;
}
export declare class DefinitionError extends FencerError {}
/** A table whose rows carry their own token (fencesql.Table). */
export declare class FencedTable {
  constructor(name: string, keyColumn: string, tokenColumn: string, columns: string[]);
  write(db: Queryable, key: unknown, token: Token, values: unknown[]): Promise<void>;
}
/** A table of highest tokens per resource, admitted inside a transaction
 * (fencesql.Tokens). */
export declare class TokenTable {
  constructor(name?: string);
  createTable(db: Queryable): Promise<void>;
  admit(tx: Queryable, resource: string, token: Token): Promise<void>;
  transaction<T, C extends Queryable = Queryable>(
    db: C | { connect(): Promise<C & { release(err?: unknown): void }>; totalCount: number },
    resource: string, token: Token, fn: (client: C) => Promise<T>): Promise<T>;
  highest(db: Queryable, resource: string): Promise<bigint | null>;
}
