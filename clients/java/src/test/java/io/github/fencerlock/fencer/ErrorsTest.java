package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * Error replies sorted by their wire code (docs/protocol.md, Errors), never
 * by their text. The replies are the server's own wording, as the wire
 * package writes them; a unit test because the codes a real server sends
 * only under faults (UNCERTAIN, SHUTDOWN) cannot all be produced on demand.
 */
class ErrorsTest {
  @Test
  void uncertainIsNeverANo() {
    Failure f = Failure.reply("UNCERTAIN outcome unknown: leadership lost while the command was in flight; the command"
        + " may or may not have taken effect: retry it with the same owner", null);
    assertInstanceOf(UncertainException.class, f.error);
    assertFalse(f.error instanceof LockedException);
    assertTrue(f.transientFailure);
    assertTrue(f.unknown);
    assertEquals("UNCERTAIN", f.error.code());
  }

  @Test
  void notLeaderNamesTheLeader() {
    Failure f = Failure.reply("NOTLEADER node-93ad 127.0.0.1:7379 not the leader: send commands to the leader", null);
    assertInstanceOf(NoLeaderException.class, f.error);
    assertEquals("127.0.0.1:7379", f.leader);
    assertFalse(f.unknown);
    assertNull(Failure.reply("NOTLEADER - - not the leader, and no leader is known: retry later", null).leader);
    assertEquals("a b", Failure.unfield("a%20b"));
    assertNull(Failure.unfield("a%2"));
  }

  @Test
  void everyCode() {
    Object[][] cases = {
      {"NOLEADER no leader is available; retry later", NoLeaderException.class, true},
      {"TIMEOUT the request timed out before it took effect; retry later", NoLeaderException.class, true},
      {"SHUTDOWN the server is shutting down", NoLeaderException.class, true},
      {"NOSESSION session 5 is not open", SessionEndedException.class, false},
      {"LEASELOST an earlier attempt was granted", LeaseLostException.class, false},
      {"RELEASED this value released the key", ValueReleasedException.class, false},
      {"WRONGTYPE Operation against a key holding the wrong kind of value", WrongTypeException.class, false},
      {"NOAUTH Authentication required.", AuthException.class, false},
      {"WRONGPASS invalid username-password pair or user is disabled.", AuthException.class, false},
      {"NOPERM this user has no permissions to access one of the keys", NoPermException.class, false},
      {"ERR invalid argument: wait: 2h0m0s is outside 0..1h0m0s", InvalidArgumentException.class, false},
      {"ERR UNCERTAIN is not the first word", InvalidArgumentException.class, false},
      {"NOSCRIPT No matching script.", ServerException.class, false},
    };
    for (Object[] c : cases) {
      Failure f = Failure.reply((String) c[0], null);
      assertInstanceOf((Class<?>) c[1], f.error, (String) c[0]);
      assertEquals(c[2], f.transientFailure, (String) c[0]);
      assertFalse(f.unknown, (String) c[0]);
    }
    assertEquals("wait", Failure.reply("ERR invalid argument: wait: 2h0m0s is outside 0..1h0m0s", null).argument);
    assertNull(Failure.reply("ERR syntax error", null).argument);
  }

  @Test
  void aConnectionLostAfterSendingIsUncertain() {
    Failure f = Failure.network(new java.io.IOException("reset"), true);
    assertInstanceOf(UncertainException.class, f.error);
    assertTrue(f.unknown);
    Failure g = Failure.network(new java.io.IOException("refused"), false);
    assertInstanceOf(NoLeaderException.class, g.error);
    assertFalse(g.unknown);
  }
}
