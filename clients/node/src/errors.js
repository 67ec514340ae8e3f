// Errors of the client, and how a failure of one attempt at one node is
// sorted. The server's error replies are read by their code (the first
// word) and the fields that follow it, never by their English text
// (docs/protocol.md "Errors", Go package wire); these classes mirror the Go
// client's sentinel errors (client/errors.go).

/** FencerError is the base class of every error this package throws. */
export class FencerError extends Error {
  /**
   * @param {string} message
   * @param {{cause?: unknown, code?: string}} [opts]
   */
  constructor(message, opts = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    /** The server's error code (first word of its reply), when a reply caused this. */
    this.code = opts.code;
  }
}

/** LockedError: another owner holds the lock (or the wait ran out). Also
 * thrown when the server remembers this owner's own release of the lock:
 * an owner value serves one lease only. */
export class LockedError extends FencerError {}

/** LeaseLostError: a lease ended without being released: the server said
 * its owner no longer holds the lock, or its validity ran out before a
 * renewal succeeded. Work done under the lease after that is unprotected;
 * the fencing token is what keeps it out of storage. */
export class LeaseLostError extends FencerError {}

/** ReleasedError is the reason of a released lease's signal. */
export class ReleasedError extends FencerError {}

/** ClosedError: the client was closed (also the reason of its leases' signals). */
export class ClosedError extends FencerError {}

/** NoLeaderError: no node could serve the request for the whole failover
 * timeout (every address unreachable, or no leader), and nothing it sent
 * may have taken effect. */
export class NoLeaderError extends FencerError {}

/** UncertainError: the outcome is unknown. The command may or may not have
 * taken effect: the server answered UNCERTAIN, or a connection dropped or
 * timed out after the command was sent, and no retry settled it within the
 * deadline. Never a "no". An acquire that ends this way is released in the
 * background with the same owner. */
export class UncertainError extends FencerError {}

/** InvalidArgumentError: the request itself is wrong (ERR reply, or a check
 * before sending). `argument` names it when the server said
 * `ERR invalid argument: <argument>: <reason>` (key, owner, ttl, wait, ...). */
export class InvalidArgumentError extends FencerError {
  /**
   * @param {string} message
   * @param {{cause?: unknown, code?: string, argument?: string}} [opts]
   */
  constructor(message, opts = {}) {
    super(message, opts);
    this.argument = opts.argument;
  }
}

/** AuthError: the server refused the credentials (WRONGPASS) or requires
 * some (NOAUTH). Not retried on other nodes: a cluster's nodes share users. */
export class AuthError extends FencerError {}

/** NoPermError: the user may not touch that lock or run that command (NOPERM). */
export class NoPermError extends FencerError {}

/** TLSError: a TLS connection failed for a reason a retry does not cure (a
 * certificate that did not verify, on either side, or a node without TLS). */
export class TLSError extends FencerError {}

/** ValueReleasedError: a server run with --redlock-multi-endpoint refused a
 * write, through its Redis-compatible commands, of the value whose release
 * is the key's newest it remembers (RELEASED). Nothing was done: that value holds no
 * lock on the key; take the lock with a new value. */
export class ValueReleasedError extends FencerError {}

/** ServerError: an error reply with another code (WRONGTYPE, ...). */
export class ServerError extends FencerError {}

/**
 * parseReply splits an error reply ("CODE text") into its code and text.
 * @param {string} reply
 */
export function parseReply(reply) {
  const i = reply.indexOf(' ');
  return i < 0 ? { code: reply, text: '' } : { code: reply.slice(0, i), text: reply.slice(i + 1) };
}

/** unfield reads one field of a NOTLEADER reply: "-" is unknown (""), and
 * %XX stands for a byte. Returns undefined if malformed. */
function unfield(w) {
  if (w === '-') return '';
  if (!w.includes('%')) return w;
  const bytes = [];
  for (let i = 0; i < w.length; i++) {
    if (w[i] !== '%') {
      bytes.push(w.charCodeAt(i));
      continue;
    }
    const h = w.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(h)) return undefined;
    bytes.push(parseInt(h, 16));
    i += 2;
  }
  return Buffer.from(bytes).toString('latin1');
}

/**
 * parseNotLeader returns the leader's id and client address a NOTLEADER
 * reply names ("" when not known), or undefined if it is malformed.
 * @param {string} text the reply after the code
 */
export function parseNotLeader(text) {
  const f = text.split(/\s+/).filter(Boolean);
  if (f.length < 2) return undefined;
  const id = unfield(f[0]);
  const addr = unfield(f[1]);
  if (id === undefined || addr === undefined) return undefined;
  return { id, addr };
}

const invalidPrefix = 'invalid argument: ';

/**
 * parseInvalidArgument returns the argument an `ERR invalid argument:
 * <arg>: <reason>` reply names, or undefined.
 * @param {string} text the reply after the code
 */
export function parseInvalidArgument(text) {
  if (!text.startsWith(invalidPrefix)) return undefined;
  const rest = text.slice(invalidPrefix.length);
  const i = rest.indexOf(': ');
  if (i <= 0 || /\s/.test(rest.slice(0, i))) return undefined;
  return { argument: rest.slice(0, i), reason: rest.slice(i + 2) };
}

// Node's codes for TLS failures that a retry meets again: certificates that
// do not verify, and alerts from the peer.
const tlsCodes = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED', 'CERT_REJECTED', 'CERT_SIGNATURE_FAILURE', 'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER', 'ERR_SSL_PACKET_LENGTH_TOO_LONG', 'EPROTO',
]);

/** tlsRefused reports whether err is a TLS failure a retry meets again. */
export function tlsRefused(err) {
  for (let e = err; e && typeof e === 'object'; e = e.cause) {
    const code = /** @type {any} */ (e).code;
    if (typeof code === 'string' && (tlsCodes.has(code) || code.startsWith('ERR_SSL_TLSV') || code.startsWith('ERR_SSL_SSLV3_ALERT'))) return true;
  }
  return false;
}

/**
 * @typedef {object} Failure
 * @property {Error} error what to throw if the request gives up on it
 * @property {boolean} transient retried on another node (node down, no leader, outcome unknown)
 * @property {boolean} unknown the command may have taken effect
 * @property {string} [leader] the leader's client address when the node named it
 * @property {string} [argument] the argument an invalid-argument reply named
 */

/**
 * classify sorts an error from one attempt at one node by the code of the
 * error reply; anything that is not an error reply is a network failure,
 * transient unless TLS refused it. `sent` says whether the command had been
 * written (a network failure after that leaves its outcome unknown).
 * @param {any} err
 * @param {boolean} sent
 * @returns {Failure}
 */
export function classify(err, sent) {
  if (err instanceof FencerError) {
    return { error: err, transient: false, unknown: false };
  }
  if (!isReplyError(err)) {
    if (tlsRefused(err)) {
      return { error: new TLSError(`TLS: ${err.message}`, { cause: err }), transient: false, unknown: false };
    }
    return { error: err, transient: true, unknown: sent };
  }
  const { code, text } = parseReply(String(err.message));
  const opts = { cause: err, code };
  switch (code) {
    case 'UNCERTAIN':
      return { error: new UncertainError(err.message, opts), transient: true, unknown: true };
    case 'NOLEADER':
    case 'SHUTDOWN':
    case 'TIMEOUT':
      return { error: new NoLeaderError(err.message, opts), transient: true, unknown: false };
    case 'NOTLEADER': {
      const nl = parseNotLeader(text);
      return { error: new NoLeaderError(err.message, opts), transient: true, unknown: false, leader: nl?.addr || undefined };
    }
    case 'WRONGPASS':
    case 'NOAUTH':
      return { error: new AuthError(err.message, opts), transient: false, unknown: false };
    case 'NOPERM':
      return { error: new NoPermError(err.message, opts), transient: false, unknown: false };
    case 'RELEASED':
      return { error: new ValueReleasedError(err.message, opts), transient: false, unknown: false };
    case 'LEASELOST':
      return { error: new LeaseLostError(err.message, opts), transient: false, unknown: false };
    case 'ERR': {
      const ia = parseInvalidArgument(text);
      return {
        error: new InvalidArgumentError(err.message, { ...opts, argument: ia?.argument }),
        transient: false, unknown: false, argument: ia?.argument,
      };
    }
  }
  return { error: new ServerError(err.message, opts), transient: false, unknown: false };
}

/** isReplyError tells an error reply (ioredis's ReplyError) from a failure. */
function isReplyError(err) {
  return err && typeof err === 'object' && err.name === 'ReplyError';
}
