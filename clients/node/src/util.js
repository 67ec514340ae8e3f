// Small helpers for time and cancellation.

/** now is the monotonic clock in milliseconds: validity and deadlines are
 * counted on it, so wall-clock jumps change nothing. */
export const now = () => performance.now();

/** TimeoutFailure is an attempt that ran past its timeout. */
export class TimeoutFailure extends Error {
  constructor(ms) {
    super(`no reply within ${Math.round(ms)}ms`);
    this.name = 'TimeoutFailure';
  }
}

/**
 * settle waits for promise, but no longer than ms (rejecting with a
 * TimeoutFailure) or until one of signals aborts (rejecting with its
 * reason). The promise is left to finish in the background; its rejection
 * is then ignored.
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {(AbortSignal|undefined)[]} signals
 * @returns {Promise<T>}
 */
export function settle(promise, ms, signals = []) {
  promise.catch(() => {});
  return new Promise((resolve, reject) => {
    const cleanups = [];
    const done = (fn, v) => {
      for (const c of cleanups) c();
      fn(v);
    };
    for (const s of signals) {
      if (!s) continue;
      if (s.aborted) return reject(s.reason);
      const on = () => done(reject, s.reason);
      s.addEventListener('abort', on, { once: true });
      cleanups.push(() => s.removeEventListener('abort', on));
    }
    if (Number.isFinite(ms)) {
      const t = setTimeout(() => done(reject, new TimeoutFailure(ms)), Math.max(0, ms));
      cleanups.push(() => clearTimeout(t));
    }
    promise.then((v) => done(resolve, v), (e) => done(reject, e));
  });
}

/**
 * sleep waits ms, or rejects with the reason of the first of signals to abort.
 * @param {number} ms
 * @param {(AbortSignal|undefined)[]} signals
 */
export function sleep(ms, signals = []) {
  return settle(new Promise(() => {}), ms, signals).catch((e) => {
    if (e instanceof TimeoutFailure) return;
    throw e;
  });
}

/** jitter spreads d over [d/2, d) so that clients do not retry in step. */
export function jitter(d) {
  return d / 2 + Math.random() * (d / 2);
}

/** anySignal is AbortSignal.any over the signals that are set. */
export function anySignal(...signals) {
  return AbortSignal.any(signals.filter(Boolean));
}

/** minBackoff is the first pause between rounds of attempts over all nodes. */
export const minBackoff = 50;

/** ConnectFailure is a failure before the command was sent: nothing can
 * have taken effect. */
export class ConnectFailure extends Error {
  constructor(cause) {
    super(`connecting: ${cause?.message ?? cause}`, { cause });
    this.name = 'ConnectFailure';
  }
}
