/**
 * fencer's Java client: leases on named locks with fencing tokens, kept alive
 * in the background, with a future that completes when they are lost; blocking
 * waits served in order of arrival; a {@link java.util.concurrent.locks.Lock}
 * shaped like Hazelcast's FencedLock; read-write locks and semaphores whose
 * holders each have a token; sessions; elections with epochs.
 *
 * <p>Start with {@link io.github.fencerlock.fencer.FencerClient}. Tokens are
 * unsigned 64-bit numbers held in a {@code long}: they are positions in the
 * cluster's log and never reach 2<sup>63</sup>, so they are never negative;
 * code that must hold for any unsigned value compares them with
 * {@link java.lang.Long#compareUnsigned}.
 */
package io.github.fencerlock.fencer;
