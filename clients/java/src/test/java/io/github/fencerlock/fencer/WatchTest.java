package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Watches (FENCE.WATCH) and Election.observe, on real fencerd processes, across the loss of the watch's node. */
@SuppressWarnings("try")
class WatchTest {
  static String summary(Watch.Event e) {
    return e.kind() + " " + e.token();
  }

  @Test
  void eventsInOrderFromAReset() throws Exception {
    try (FencerClient c = FencerClient.connect(Servers.oneAddr())) {
      String k = "w-" + UUID.randomUUID();
      List<Watch.Event> got = new CopyOnWriteArrayList<>();
      try (Watch w = c.watch(k, got::add)) {
        Lease a = c.acquire(k);
        a.release();
        Lease b = c.acquire(k, new LeaseOptions().ttl(Duration.ofMillis(300)));
        Servers.await("five events", Duration.ofSeconds(10), () -> got.size() >= 5);
        List<String> want = List.of("RESET 0", "GRANTED " + a.token(), "RELEASED " + a.token(), "GRANTED " + b.token(),
            "EXPIRED " + b.token());
        List<String> have = new ArrayList<>();
        for (Watch.Event e : got) {
          have.add(summary(e));
        }
        assertEquals(want, have);
        assertEquals(a.owner(), got.get(1).owner());
        for (int i = 1; i < got.size(); i++) {
          assertTrue(got.get(i).position() > got.get(i - 1).position());
        }
        assertEquals(a.token(), got.get(1).position(), "a grant's token is its position");
        // Resuming after a position delivers what followed it.
        List<Watch.Event> again = new CopyOnWriteArrayList<>();
        try (Watch w2 = c.watch(k, got.get(2).position(), again::add)) {
          Servers.await("two events", Duration.ofSeconds(10), () -> again.size() >= 2);
          assertEquals("GRANTED " + b.token(), summary(again.get(0)));
        }
      }
    }
  }

  @Test
  void aWatchResumesOnAnotherNodeWithoutRepeatsOrGaps() throws Exception {
    Servers.Cluster cl = Servers.newCluster(3);
    try {
      Servers.Proc leader = cl.leader(Duration.ofSeconds(10));
      List<String> order = new ArrayList<>();
      Servers.Proc first = null;
      for (Servers.Proc p : cl.nodes) {
        if (p != leader) {
          order.add(0, p.addr()); // the followers first: the watch starts on one
          if (first == null) {
            first = p;
          }
        } else {
          order.add(p.addr());
        }
      }
      // order = [follower2, follower1, leader]; the watch's client starts on follower2.
      Servers.Proc watched = cl.nodes.stream().filter(p -> p.addr().equals(order.get(0))).findFirst().orElseThrow();
      try (FencerClient wc = FencerClient.builder(order).build();
          FencerClient c = FencerClient.builder(leader.addr()).build()) {
        List<Watch.Event> got = new CopyOnWriteArrayList<>();
        Watch w = wc.watch("watched", got::add);
        List<Long> tokens = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
          Lease l = c.acquire("watched");
          tokens.add(l.token());
          l.release();
        }
        Servers.await("seven events", Duration.ofSeconds(10), () -> got.size() >= 7);
        System.out.println("killing the watch's node " + watched.addr());
        watched.kill();
        for (int i = 0; i < 3; i++) {
          Lease l = c.acquire("watched");
          tokens.add(l.token());
          l.release();
        }
        Servers.await("thirteen events", Duration.ofSeconds(30), () -> got.size() >= 13);
        Thread.sleep(500);
        List<String> want = new ArrayList<>(List.of("RESET 0"));
        for (long t : tokens) {
          want.add("GRANTED " + t);
          want.add("RELEASED " + t);
        }
        List<String> have = new ArrayList<>();
        for (Watch.Event e : got) {
          have.add(summary(e));
        }
        assertEquals(want, have);
        assertTrue(!w.done().isDone(), "the watch goes on");
        w.close();
        assertNull(w.done().get(1, TimeUnit.SECONDS));
      }
    } finally {
      cl.stop();
    }
  }

  @Test
  void closingTheClientEndsItsWatchesAtOnce() throws Exception {
    FencerClient c = FencerClient.connect(Servers.oneAddr());
    Watch w = c.watch("w-" + UUID.randomUUID(), e -> { });
    long t0 = System.nanoTime();
    c.close();
    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 2000, "close did not wait for the watch's read");
    assertTrue(w.done().get(1, TimeUnit.SECONDS) instanceof ClosedException);
  }

  @Test
  void observeAnElection() throws Exception {
    try (FencerClient c = FencerClient.connect(Servers.oneAddr());
        Session s1 = c.openSession(Duration.ofSeconds(5));
        Session s2 = c.openSession(Duration.ofSeconds(5))) {
      String name = "obs-" + UUID.randomUUID();
      List<Leader> seen = new CopyOnWriteArrayList<>();
      Election e1 = c.newElection(s1, name);
      Election e2 = c.newElection(s2, name);
      try (Watch w = e2.observe(seen::add)) {
        long epoch1 = e1.campaign("a");
        e1.proclaim("a2");
        Thread t = new Thread(() -> {
          try {
            e2.campaign("b");
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
        t.start();
        Thread.sleep(300);
        e1.resign();
        t.join(10000);
        Servers.await("three leaders", Duration.ofSeconds(10), () -> seen.size() >= 3);
        assertEquals("a", seen.get(0).value());
        assertEquals(epoch1, seen.get(0).epoch());
        assertEquals("a2", seen.get(1).value());
        assertEquals(epoch1, seen.get(1).epoch());
        assertEquals("b", seen.get(2).value());
        assertEquals(e2.epoch(), seen.get(2).epoch());
        assertTrue(seen.get(2).epoch() > epoch1);
      }
    }
  }
}
