package io.github.fencerlock.fencer.redisson;

import io.github.fencerlock.fencer.FencerClient;
import io.github.fencerlock.fencer.InvalidArgumentException;
import io.github.fencerlock.fencer.LeaseLostException;
import org.redisson.RedissonMultiLock;
import org.redisson.RedissonReadLock;
import org.redisson.RedissonWriteLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * RedissonTokens gives Redisson users pointed at fencer the fencing token of
 * the lock they already hold: one {@code FENCE.TOKEN key field} through a
 * {@link FencerClient} of the same cluster, where key is the lock's name and
 * field is the hash field Redisson wrote for the holder, its client's ID
 * ({@link RedissonClient#getId()}) and the holding thread's ID. fencer gives
 * the lock's hash a token when the hash is created, larger than every
 * earlier token; a re-entrant lock by the same thread keeps it.
 *
 * <p>So the token must be asked for on the holding thread
 * ({@link #tokenFor(RLock)}), or with that thread's ID
 * ({@link #tokenFor(RLock, long)}). It is for {@code RLock} as
 * {@code getLock}, {@code getFairLock}, {@code getSpinLock} and
 * {@code getFencedLock} make it; not for {@code getReadWriteLock}'s locks,
 * nor the semaphores: their hashes are shared by every holder, so the hash's
 * one token, made when the first holder created it, is also the token of
 * every holder that joined later. A later holder's token is then no larger
 * than that of an earlier one it may overlap with or follow, and a store
 * could not refuse the earlier holder's late writes. Use
 * {@link io.github.fencerlock.fencer.FencedReadWriteLock} and
 * {@link io.github.fencerlock.fencer.FencedSemaphore}, whose holders each
 * have a token of their own.
 */
public final class RedissonTokens {
  private final FencerClient fencer;
  private final String redissonId;

  /**
   * Makes the helper for locks of redisson, asking fencer.
   *
   * @param fencer a client of the cluster redisson talks to
   * @param redisson the Redisson client the locks were made with
   */
  public RedissonTokens(FencerClient fencer, RedissonClient redisson) {
    this.fencer = fencer;
    this.redissonId = redisson.getId();
  }

  /**
   * tokenFor returns the fencing token of lock, held by the current thread.
   * It throws {@link LeaseLostException} if the current thread does not hold
   * it (it expired, or was never taken).
   *
   * @param lock a lock the current thread holds
   * @return the token
   */
  public long tokenFor(RLock lock) {
    return tokenFor(lock, Thread.currentThread().getId());
  }

  /**
   * tokenFor returns the fencing token of lock, held by the thread whose ID
   * is threadId (Redisson's {@code lock(leaseTime, unit)} and friends take
   * the caller's thread; its async methods take a thread ID).
   *
   * @param lock a lock the thread holds
   * @param threadId the holding thread's ID
   * @return the token
   */
  public long tokenFor(RLock lock, long threadId) {
    if (lock instanceof RedissonReadLock || lock instanceof RedissonWriteLock) {
      throw new InvalidArgumentException("tokenFor: a Redisson read-write lock's hash carries one token for all its"
          + " holders; use FencedReadWriteLock", "lock");
    }
    if (lock instanceof RedissonMultiLock) {
      throw new InvalidArgumentException("tokenFor: a Redisson multi-lock has no single key; ask for each lock's token",
          "lock");
    }
    return fencer.tokenFor(lock.getName(), redissonId + ":" + threadId);
  }

  /**
   * tokenFor returns fencer's fencing token of an {@code RFencedLock} held
   * by the current thread: the token fencer issued when the lock's hash was
   * made, ordered with every other grant of the cluster, rather than
   * Redisson's own counter ({@code getToken()}), which a write outside
   * Redisson's scripts can leave behind.
   *
   * @param lock a fenced lock the current thread holds
   * @return the token
   */
  public long tokenFor(RFencedLock lock) {
    return tokenFor((RLock) lock, Thread.currentThread().getId());
  }
}
