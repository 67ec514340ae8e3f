package io.github.fencerlock.fencer;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import javax.net.ssl.SSLException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Failure is one attempt's failure at one node, sorted by the code of the
 * server's error reply (docs/protocol.md, Errors; Go package wire), as the
 * other clients sort it: what to throw if the request gives up on it,
 * whether another attempt may cure it, whether the command may have taken
 * effect, the leader a NOTLEADER reply named, and the argument an
 * invalid-argument reply named.
 */
final class Failure {
  final FencerException error;
  final boolean transientFailure;
  final boolean unknown;
  final String leader;
  final String argument;

  private Failure(FencerException error, boolean transientFailure, boolean unknown, String leader, String argument) {
    this.error = error;
    this.transientFailure = transientFailure;
    this.unknown = unknown;
    this.leader = leader;
    this.argument = argument;
  }

  static Failure fatal(FencerException e) {
    return new Failure(e, false, false, null, null);
  }

  /**
   * network sorts a failure that is not an error reply: transient, unless
   * TLS refused it; its outcome unknown if the command may have been sent.
   */
  static Failure network(Throwable t, boolean sent) {
    if (tlsRefused(t)) {
      return fatal(new TlsException("TLS: " + t.getMessage(), null, t));
    }
    String what = sent ? "connection failed after sending: " : "connecting: ";
    FencerException e = sent ? new UncertainException(what + t, null, t) : new NoLeaderException(what + t, null, t);
    return new Failure(e, true, sent, null, null);
  }

  /** reply sorts an error reply by its code. */
  static Failure reply(JedisDataException e) {
    return reply(e.getMessage(), e);
  }

  static Failure reply(String msg, Throwable cause) {
    if (msg == null) {
      msg = "";
    }
    int sp = msg.indexOf(' ');
    String code = sp < 0 ? msg : msg.substring(0, sp);
    String text = sp < 0 ? "" : msg.substring(sp + 1);
    switch (code) {
      case "UNCERTAIN":
        return new Failure(new UncertainException(msg, code, cause), true, true, null, null);
      case "NOLEADER":
      case "SHUTDOWN":
      case "TIMEOUT":
        return new Failure(new NoLeaderException(msg, code, cause), true, false, null, null);
      case "NOTLEADER": {
        String[] nl = parseNotLeader(text);
        String addr = nl == null || nl[1].isEmpty() ? null : nl[1];
        return new Failure(new NoLeaderException(msg, code, cause), true, false, addr, null);
      }
      case "WRONGPASS":
      case "NOAUTH":
        return fatal(new AuthException(msg, code, cause));
      case "NOPERM":
        return fatal(new NoPermException(msg, code, cause));
      case "RELEASED":
        return fatal(new ValueReleasedException(msg, code, cause));
      case "LEASELOST":
        return fatal(new LeaseLostException(msg, code, cause));
      case "NOSESSION":
        return fatal(new SessionEndedException(msg, code, cause));
      case "WRONGTYPE":
        return fatal(new WrongTypeException(msg, code, cause));
      case "ERR": {
        String arg = parseInvalidArgument(text);
        return new Failure(new InvalidArgumentException(msg, code, arg, cause), false, false, null, arg);
      }
      default:
        return fatal(new ServerException(msg, code, cause));
    }
  }

  private static final String INVALID = "invalid argument: ";

  /**
   * parseInvalidArgument returns the argument an {@code ERR invalid argument:
   * <arg>: <reason>} reply names, or null.
   */
  static String parseInvalidArgument(String text) {
    if (!text.startsWith(INVALID)) {
      return null;
    }
    String rest = text.substring(INVALID.length());
    int i = rest.indexOf(": ");
    if (i <= 0) {
      return null;
    }
    String arg = rest.substring(0, i);
    for (int k = 0; k < arg.length(); k++) {
      if (Character.isWhitespace(arg.charAt(k))) {
        return null;
      }
    }
    return arg;
  }

  /**
   * parseNotLeader returns the leader's id and client address a NOTLEADER
   * reply names ("" when not known), or null if it is malformed.
   */
  static String[] parseNotLeader(String text) {
    String[] f = text.trim().split("\\s+");
    if (f.length < 2) {
      return null;
    }
    String id = unfield(f[0]);
    String addr = unfield(f[1]);
    if (id == null || addr == null) {
      return null;
    }
    return new String[] {id, addr};
  }

  /** unfield reads one NOTLEADER field: "-" is unknown, %XX a byte. */
  static String unfield(String w) {
    if (w.equals("-")) {
      return "";
    }
    if (w.indexOf('%') < 0) {
      return w;
    }
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    for (int i = 0; i < w.length(); i++) {
      char c = w.charAt(i);
      if (c != '%') {
        b.write(c);
        continue;
      }
      if (i + 3 > w.length()) {
        return null;
      }
      try {
        b.write(Integer.parseInt(w.substring(i + 1, i + 3), 16));
      } catch (RuntimeException e) {
        return null;
      }
      i += 2;
    }
    return b.toString(StandardCharsets.ISO_8859_1);
  }

  static boolean tlsRefused(Throwable t) {
    for (Throwable e = t; e != null; e = e.getCause()) {
      if (e instanceof SSLException) {
        return true;
      }
      if (e.getCause() == e) {
        break;
      }
    }
    return false;
  }
}
