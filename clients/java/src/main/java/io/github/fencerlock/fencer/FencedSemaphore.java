package io.github.fencerlock.fencer;

/**
 * FencedSemaphore is a counting lock: up to {@link #permits()} holders at
 * once, each with a permit that is a {@link Lease} of its own. A permit takes
 * the lowest free slot, 0 to permits &minus; 1 ({@link Lease#slot()}), and
 * its token is larger than every earlier token, so the tokens of each slot
 * increase: a store fences a permit holder per (resource, slot) with the
 * plain rule. Waits are first come, first served; a permit whose lease ends
 * is handed to the first waiter.
 *
 * <p>The number of permits is the semaphore's while anyone holds it: an
 * acquire that gives another number is refused with
 * {@link InvalidArgumentException}. This object holds no state.
 */
public final class FencedSemaphore {
  private final FencerClient client;
  private final String name;
  private final int permits;
  private final LeaseOptions opts;

  FencedSemaphore(FencerClient client, String name, int permits, LeaseOptions opts) {
    if (permits < 1) {
      throw new InvalidArgumentException("permits " + permits + " is not positive", "permits");
    }
    this.client = client;
    this.name = name;
    this.permits = permits;
    this.opts = opts.copy();
  }

  /**
   * The semaphore's name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * The number of permits.
   *
   * @return the permits
   */
  public int permits() {
    return permits;
  }

  /**
   * acquire waits for a permit and returns its lease.
   *
   * @return the permit's lease
   * @throws InterruptedException if interrupted while waiting
   */
  public Lease acquire() throws InterruptedException {
    return client.acquire(new Lease.Req(Lease.Kind.PERMIT, name, opts, permits), opts, true, true);
  }

  /**
   * tryAcquire is acquire without waiting: {@link LockedException} at once
   * if every permit is held or anyone waits for one.
   *
   * @return the permit's lease
   */
  public Lease tryAcquire() {
    return client.tryAcquire(new Lease.Req(Lease.Kind.PERMIT, name, opts, permits), opts);
  }
}
