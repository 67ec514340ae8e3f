package io.github.fencerlock.fencer;

import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Election is a leader election: a lock named by the election's name, held
 * under a session, whose holder is the leader and whose fencing token is the
 * leader's <b>epoch</b>. Epochs strictly increase from one leader to the
 * next, so a store that checks them (see
 * {@link io.github.fencerlock.fencer.jdbc.TokenTable}) refuses a deposed
 * leader's late writes.
 *
 * <p>An Election is one campaigner's handle; it campaigns for one term at a
 * time. It is safe for concurrent use. Campaigners queue on the server and
 * are elected in the order they arrived, without polling.
 */
public final class Election {
  private final FencerClient client;
  private final Session session;
  private final String name;
  // lease is the current term (null while not leading), last the latest
  // term, kept after it ends; both guarded by this.
  private Lease lease;
  private Lease last;

  Election(FencerClient client, Session session, String name) {
    if (session == null) {
      throw new InvalidArgumentException("an election needs a session", "session");
    }
    this.client = client;
    this.session = session;
    this.name = name;
  }

  /**
   * The election's name.
   *
   * @return the name
   */
  public String name() {
    return name;
  }

  /**
   * campaign waits until this campaigner is elected and returns its epoch;
   * value is announced as the leader's value, atomically with the election.
   * Campaigning again while leading returns the current epoch. It throws
   * {@link SessionEndedException} (or the session's cause) if the session
   * ends first.
   *
   * @param value the value to announce
   * @return the epoch
   * @throws InterruptedException if interrupted while waiting
   */
  public long campaign(String value) throws InterruptedException {
    synchronized (this) {
      if (lease != null && lease.cause() == null) {
        return lease.token();
      }
    }
    Lease l = client.acquire(name, new LeaseOptions().session(session).value(value));
    synchronized (this) {
      lease = l;
      last = l;
    }
    return l.token();
  }

  private synchronized Lease leading() {
    return lease != null && lease.cause() == null ? lease : null;
  }

  /**
   * The epoch of the current term, or 0 if not leading.
   *
   * @return the epoch
   */
  public long epoch() {
    Lease l = leading();
    return l == null ? 0 : l.token();
  }

  /**
   * A future that completes when the latest term's leadership ends (the
   * session ended or was lost, or {@link #resign}), with why; already
   * completed with a {@link NotElectedException} if this campaigner was never
   * elected. Stop acting as the leader when it completes.
   *
   * @return the future
   */
  public synchronized CompletableFuture<FencerException> done() {
    if (last == null) {
      return CompletableFuture.completedFuture(new NotElectedException("not elected in \"" + name + "\""));
    }
    return last.done();
  }

  /**
   * proclaim announces a new value as the leader's, keeping the epoch. It
   * throws {@link NotElectedException} if this campaigner does not lead.
   *
   * @param value the new value
   */
  public void proclaim(String value) {
    Lease l = leading();
    if (l == null) {
      throw new NotElectedException("proclaim in \"" + name + "\": not the leader");
    }
    Object v = client.exchange(client.standard(), "FENCE.PROCLAIM", name, l.owner(),
        Long.toUnsignedString(session.id()), value).reply;
    if (FencerClient.num(v) != 1) {
      l.end(new LeaseLostException("the server says this campaigner no longer leads \"" + name + "\""));
      throw new NotElectedException("proclaim in \"" + name + "\": not the leader");
    }
  }

  /**
   * resign gives up leadership, if this campaigner leads: {@link #done()}
   * completes first, then the next campaigner in line is elected in the same
   * entry that frees the election. It does nothing if not leading.
   */
  public void resign() {
    Lease l;
    synchronized (this) {
      l = lease;
    }
    if (l == null) {
      return;
    }
    try {
      l.release();
    } catch (LeaseLostException e) {
      // not leading any more: nothing to resign
    }
    synchronized (this) {
      if (lease == l) {
        lease = null;
      }
    }
  }

  /**
   * observe delivers to listener the election's leader now (if there is
   * one) and then every change of leader or of its value, in order, pushed
   * by the server ({@code FENCE.WATCH}), without polling. Epochs delivered
   * never go back. {@link Leader#session()} is 0: a watch does not carry it.
   * Close the returned watch to stop.
   *
   * @param listener receives the leaders, on the watch's thread
   * @return the watch
   */
  public Watch observe(java.util.function.Consumer<Leader> listener) {
    Leader[] last = {null};
    return client.watch(name, ev -> {
      switch (ev.kind()) {
        case GRANTED:
        case PROCLAIMED:
        case RESET:
          break;
        default:
          return; // released, expired, revoked: the next grant follows
      }
      Leader ld = new Leader(ev.value(), ev.token(), ev.owner(), 0);
      if (ld.epoch() == 0 || ld.equals(last[0])
          || (last[0] != null && Long.compareUnsigned(ld.epoch(), last[0].epoch()) < 0)) {
        return; // free, unchanged, or older than what was delivered
      }
      last[0] = ld;
      listener.accept(ld);
    });
  }

  /**
   * leader returns the election's current leader, or empty if there is
   * none. A linearizable read ({@code FENCE.HOLDER}).
   *
   * @return the leader
   */
  public Optional<Leader> leader() {
    Object v = client.exchange(client.standard(), "FENCE.HOLDER", name).reply;
    if (v == null) {
      return Optional.empty();
    }
    List<?> a = FencerClient.asList(v, 5, "FENCE.HOLDER");
    return Optional.of(new Leader(FencerClient.str(a.get(4)), FencerClient.num(a.get(1)), FencerClient.str(a.get(0)),
        FencerClient.num(a.get(3))));
  }
}
