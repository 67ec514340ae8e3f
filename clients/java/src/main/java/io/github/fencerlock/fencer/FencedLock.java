package io.github.fencerlock.fencer;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * FencedLock is a distributed {@link Lock} with a fencing token, shaped like
 * Hazelcast's {@code FencedLock}: {@link #lockAndGetFence()},
 * {@link #tryLockAndGetFence(long, TimeUnit)}, {@link #unlock()},
 * {@link #getFence()}, {@link #isLocked()}.
 *
 * <p>As Hazelcast's, it is owned by the thread that took it and re-entrant
 * by that thread: a thread that holds it and locks it again gets the same
 * fence, and must unlock it as many times. {@link #unlock()} from a thread
 * that does not hold it throws {@link IllegalMonitorStateException}. Other
 * threads of the same process wait for it in the server's queue like any
 * other client, first come first served.
 *
 * <p>Each hold is a {@link Lease} renewed in the background. If it is lost
 * (the server says so, or its validity ran out before a renewal
 * succeeded: a pause, a partition), {@link #unlock()} and
 * {@link #getFence()} throw {@link LeaseLostException}, and the thread holds
 * the lock no more; so does a re-entrant {@link #lock()}. Work done after
 * the loss is unprotected: pass the fence to the storage with every write,
 * and let the storage refuse a fence lower than one it has seen.
 *
 * <p>{@link #lock()} blocks until granted, through interrupts (which it
 * keeps for the caller); {@link #lockInterruptibly()} stops waiting when
 * interrupted. {@link #newCondition()} is not supported.
 */
public final class FencedLock implements Lock {
  /** The fence a failed tryLockAndGetFence returns, as Hazelcast's. */
  public static final long INVALID_FENCE = 0;

  private final FencerClient client;
  private final String name;
  private final LeaseOptions opts;
  private final Map<Thread, Hold> holds = new ConcurrentHashMap<>();

  /** Hold is one thread's hold: its lease and how many times it locked. */
  private static final class Hold {
    final Lease lease;
    int count = 1;

    Hold(Lease lease) {
      this.lease = lease;
    }
  }

  FencedLock(FencerClient client, String name, LeaseOptions opts) {
    if (name == null || name.isEmpty()) {
      throw new InvalidArgumentException("empty lock name", "key");
    }
    this.client = client;
    this.name = name;
    this.opts = opts.copy().autoRenew(true).owner(null);
  }

  /**
   * The lock's name.
   *
   * @return the name
   */
  public String getName() {
    return name;
  }

  /**
   * reentered returns the fence if the current thread holds the lock and
   * counts one more hold; null if it does not hold it. A hold whose lease
   * was lost is dropped and its cause thrown.
   */
  private Long reentered() {
    Hold h = holds.get(Thread.currentThread());
    if (h == null) {
      return null;
    }
    FencerException lost = h.lease.cause();
    if (lost != null) {
      drop(Thread.currentThread(), h);
      throw lost;
    }
    h.count++;
    return h.lease.token();
  }

  /**
   * drop forgets a hold whose lease was lost and releases it on the server
   * in the background: the client's count of the validity ends before the
   * server's, and a waiter should not wait out the rest of it. Its owner
   * served that hold only, so the release frees nothing else.
   */
  private void drop(Thread t, Hold h) {
    holds.remove(t);
    Lease.releaseLater(client, h.lease.req());
  }

  private long took(Lease l) {
    holds.put(Thread.currentThread(), new Hold(l));
    return l.token();
  }

  /**
   * lockAndGetFence takes the lock, waiting until it is granted, and
   * returns its fence: larger than every earlier fence of the lock
   * (unsigned; see {@link FencerClient}). A re-entrant call returns the
   * same fence. Interrupts do not stop the wait; they are kept for the
   * caller.
   *
   * @return the fence
   */
  public long lockAndGetFence() {
    Long f = reentered();
    if (f != null) {
      return f;
    }
    try {
      return took(client.acquire(Lease.Req.plain(name, opts), opts.copy().wait(null), true, false));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("unreachable: a lock() was interrupted", e);
    }
  }

  /**
   * lock takes the lock, waiting until it is granted.
   */
  @Override
  public void lock() {
    lockAndGetFence();
  }

  /**
   * lockInterruptibly takes the lock, waiting until it is granted or the
   * thread is interrupted.
   *
   * @throws InterruptedException if interrupted while waiting
   */
  @Override
  public void lockInterruptibly() throws InterruptedException {
    if (Thread.interrupted()) {
      throw new InterruptedException();
    }
    if (reentered() != null) {
      return;
    }
    took(client.acquire(Lease.Req.plain(name, opts), opts.copy().wait(null), true, true));
  }

  /**
   * tryLockAndGetFence takes the lock if it is free, without waiting, and
   * returns its fence, or {@link #INVALID_FENCE} if another owner holds it.
   *
   * @return the fence, or INVALID_FENCE
   */
  public long tryLockAndGetFence() {
    Long f = reentered();
    if (f != null) {
      return f;
    }
    try {
      return took(client.tryAcquire(Lease.Req.plain(name, opts), opts));
    } catch (LockedException e) {
      return INVALID_FENCE;
    }
  }

  /**
   * tryLockAndGetFence waits up to timeout for the lock and returns its
   * fence, or {@link #INVALID_FENCE} if it was not granted in time.
   *
   * @param time the longest wait
   * @param unit its unit
   * @return the fence, or INVALID_FENCE
   * @throws InterruptedException if interrupted while waiting
   */
  public long tryLockAndGetFence(long time, TimeUnit unit) throws InterruptedException {
    Long f = reentered();
    if (f != null) {
      return f;
    }
    Duration wait = Duration.ofNanos(Math.max(0, unit.toNanos(time)));
    try {
      return took(client.acquire(Lease.Req.plain(name, opts), opts.copy().wait(wait), true, true));
    } catch (LockedException e) {
      return INVALID_FENCE;
    }
  }

  /**
   * tryLock takes the lock if it is free, without waiting.
   *
   * @return whether the lock was taken
   */
  @Override
  public boolean tryLock() {
    return tryLockAndGetFence() != INVALID_FENCE;
  }

  /**
   * tryLock waits up to time for the lock.
   *
   * @param time the longest wait
   * @param unit its unit
   * @return whether the lock was taken
   * @throws InterruptedException if interrupted while waiting
   */
  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    return tryLockAndGetFence(time, unit) != INVALID_FENCE;
  }

  /**
   * unlock releases one hold of the current thread; the last one frees the
   * lock on the server, handing it to the first waiter. It throws
   * {@link IllegalMonitorStateException} if the current thread does not
   * hold the lock, and {@link LeaseLostException} if its lease was lost (the
   * thread then holds it no more).
   */
  @Override
  public void unlock() {
    Thread t = Thread.currentThread();
    Hold h = holds.get(t);
    if (h == null) {
      throw new IllegalMonitorStateException("\"" + name + "\" is not held by the current thread");
    }
    FencerException lost = h.lease.cause();
    if (lost != null) {
      drop(t, h);
      throw lost;
    }
    if (--h.count > 0) {
      return;
    }
    holds.remove(t);
    h.lease.release();
  }

  /**
   * getFence returns the fence of the current thread's hold. It throws
   * {@link IllegalMonitorStateException} if the current thread does not hold
   * the lock, and {@link LeaseLostException} if its lease was lost.
   *
   * @return the fence
   */
  public long getFence() {
    Thread t = Thread.currentThread();
    Hold h = holds.get(t);
    if (h == null) {
      throw new IllegalMonitorStateException("\"" + name + "\" is not held by the current thread");
    }
    FencerException lost = h.lease.cause();
    if (lost != null) {
      drop(t, h);
      throw lost;
    }
    return h.lease.token();
  }

  /**
   * isLocked reports whether anyone holds the lock, asking the server (a
   * linearizable read).
   *
   * @return whether the lock is held
   */
  public boolean isLocked() {
    return client.status(name).isPresent();
  }

  /**
   * isLockedByCurrentThread reports whether the current thread holds the
   * lock with a lease still valid.
   *
   * @return whether this thread holds it
   */
  public boolean isLockedByCurrentThread() {
    Hold h = holds.get(Thread.currentThread());
    return h != null && h.lease.isValid();
  }

  /**
   * getLockCount returns how many times the current thread holds the lock
   * (its re-entrant count), 0 if it does not.
   *
   * @return the count
   */
  public int getLockCount() {
    Hold h = holds.get(Thread.currentThread());
    return h == null ? 0 : h.count;
  }

  /**
   * lease returns the current thread's lease on the lock (its token, its
   * {@code done()} future), or null if it does not hold it.
   *
   * @return the lease, or null
   */
  public Lease lease() {
    Hold h = holds.get(Thread.currentThread());
    return h == null ? null : h.lease;
  }

  /**
   * newCondition is not supported: a condition would need the lock's
   * waiters to be woken across processes.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("FencedLock does not support conditions");
  }
}
