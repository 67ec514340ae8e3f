package io.github.fencerlock.fencer;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Resp reads and writes RESP for a watch's connection, which the client
 * drives itself (not through Jedis): it reads pushes as they come, and
 * sends PING between them from another thread to find a node that stopped
 * answering. RESP2 and RESP3 replies are read; a push is a {@link Push}, an
 * error reply a {@link Error}, a map a flat list.
 */
final class Resp {
  private Resp() {}

  /** Push is a RESP3 push message. */
  static final class Push {
    final List<Object> elems;

    Push(List<Object> elems) {
      this.elems = elems;
    }
  }

  /** Error is an error reply. */
  static final class Error {
    final String message;

    Error(String message) {
      this.message = message;
    }
  }

  /** The longest line or bulk string read: the server's own limit on an argument. */
  private static final int MAX = 1 << 20;

  static void write(OutputStream out, String... args) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.write(('*' + Integer.toString(args.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
    for (String a : args) {
      byte[] v = a.getBytes(StandardCharsets.UTF_8);
      b.write(('$' + Integer.toString(v.length) + "\r\n").getBytes(StandardCharsets.US_ASCII));
      b.write(v);
      b.write('\r');
      b.write('\n');
    }
    out.write(b.toByteArray());
  }

  static Object read(InputStream in) throws IOException {
    int t = in.read();
    if (t < 0) {
      throw new EOFException("connection closed");
    }
    String line = line(in);
    switch (t) {
      case '+':
      case ',':
      case '(':
        return line;
      case '-':
      case '!':
        return new Error(t == '!' ? new String(bulk(in, Integer.parseInt(line)), StandardCharsets.UTF_8) : line);
      case ':':
        return Long.parseLong(line);
      case '#':
        return "t".equals(line);
      case '_':
        return null;
      case '$':
      case '=': {
        int n = Integer.parseInt(line);
        if (n < 0) {
          return null;
        }
        String s = new String(bulk(in, n), StandardCharsets.UTF_8);
        return t == '=' && s.length() >= 4 ? s.substring(4) : s;
      }
      case '*':
      case '~':
      case '>':
      case '%':
      case '|': {
        int n = Integer.parseInt(line);
        if (n < 0) {
          return null;
        }
        if (n > MAX) {
          throw new IOException("RESP: " + n + " elements");
        }
        int count = t == '%' || t == '|' ? 2 * n : n;
        List<Object> elems = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
          elems.add(read(in));
        }
        if (t == '|') {
          return read(in); // attributes come before the reply they describe
        }
        return t == '>' ? new Push(elems) : elems;
      }
      default:
        throw new IOException("RESP: unexpected type byte " + t);
    }
  }

  private static byte[] bulk(InputStream in, int n) throws IOException {
    if (n > MAX * 64) {
      throw new IOException("RESP: bulk of " + n + " bytes");
    }
    byte[] b = in.readNBytes(n);
    if (b.length != n || in.read() != '\r' || in.read() != '\n') {
      throw new EOFException("RESP: short bulk string");
    }
    return b;
  }

  private static String line(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    for (;;) {
      int c = in.read();
      if (c < 0) {
        throw new EOFException("connection closed");
      }
      if (c == '\r') {
        if (in.read() != '\n') {
          throw new IOException("RESP: CR without LF");
        }
        return b.toString(StandardCharsets.UTF_8);
      }
      if (b.size() > MAX) {
        throw new IOException("RESP: line too long");
      }
      b.write(c);
    }
  }
}
