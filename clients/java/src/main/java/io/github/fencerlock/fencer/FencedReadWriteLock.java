package io.github.fencerlock.fencer;

/**
 * FencedReadWriteLock is a read-write lock: any number of readers, or one
 * writer. Every grant is a {@link Lease} with a fencing token of its own: a
 * writer's token is larger than every earlier grant's on the lock, readers'
 * included, while readers that hold together have different tokens, so a
 * store fences them with the read-write rule, not "highest token wins".
 *
 * <p>Waits are first come, first served: a reader that arrives while a
 * writer waits queues behind it, so a stream of readers does not starve a
 * writer. A write lease can be downgraded to a read lease without a gap
 * ({@link Lease#downgrade()}); a read lease cannot be upgraded (two readers
 * upgrading at once would wait for each other forever): release it, then
 * take the write lock.
 *
 * <p>The lock is a key of its own kind on the server: a plain lock or a
 * semaphore of the same name is refused with {@link WrongTypeException}
 * while held. This object holds no state; each lock is a lease of its own,
 * with a fresh owner unless the options name one.
 */
public final class FencedReadWriteLock {
  private final FencerClient client;
  private final String name;
  private final LeaseOptions opts;

  FencedReadWriteLock(FencerClient client, String name, LeaseOptions opts) {
    this.client = client;
    this.name = name;
    this.opts = opts.copy();
  }

  /**
   * The lock's name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * readLock waits for a read side of the lock and returns its lease:
   * granted when no writer holds the lock and every earlier waiter has been
   * served.
   *
   * @return the read lease
   * @throws InterruptedException if interrupted while waiting
   */
  public Lease readLock() throws InterruptedException {
    return client.acquire(new Lease.Req(Lease.Kind.READ, name, opts, 0), opts, true, true);
  }

  /**
   * writeLock waits for the write side of the lock and returns its lease:
   * granted when no one else holds the lock and every earlier waiter has
   * been served.
   *
   * @return the write lease
   * @throws InterruptedException if interrupted while waiting
   */
  public Lease writeLock() throws InterruptedException {
    return client.acquire(new Lease.Req(Lease.Kind.WRITE, name, opts, 0), opts, true, true);
  }

  /**
   * tryReadLock is readLock without waiting: {@link LockedException} at once
   * if a writer holds the lock or anyone waits for it.
   *
   * @return the read lease
   */
  public Lease tryReadLock() {
    return client.tryAcquire(new Lease.Req(Lease.Kind.READ, name, opts, 0), opts);
  }

  /**
   * tryWriteLock is writeLock without waiting: {@link LockedException} at
   * once if anyone holds the lock or waits for it.
   *
   * @return the write lease
   */
  public Lease tryWriteLock() {
    return client.tryAcquire(new Lease.Req(Lease.Kind.WRITE, name, opts, 0), opts);
  }
}
