package io.github.fencerlock.fencer;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import javax.net.ssl.SSLSocket;
import redis.clients.jedis.ClientSetInfoConfig;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Node is one address of the cluster: its idle connections, which one-off
 * requests (renewals, releases, reads) borrow one at a time, and every
 * connection open to it, which {@link FencerClient#close} closes. A Jedis
 * connection carries one command at a time, so a request that hangs holds
 * up no other: it is closed when its attempt times out, and the next
 * request opens a fresh one. Waiting acquires open connections of their own
 * ({@link Waiter}).
 */
final class Node {
  final FencerClient client;
  final String addr;
  private final HostAndPort hostAndPort;
  // idle guards nothing else: a connection is in it, or borrowed by exactly
  // one request, or closed.
  private final ConcurrentLinkedDeque<Connection> idle = new ConcurrentLinkedDeque<>();
  private final Set<Connection> open = ConcurrentHashMap.newKeySet();

  Node(FencerClient client, String addr) {
    this.client = client;
    this.addr = addr;
    this.hostAndPort = parse(addr);
  }

  /** parse reads "host:port" or "[v6]:port". */
  static HostAndPort parse(String a) {
    String host;
    String port;
    if (a.startsWith("[")) {
      int end = a.indexOf("]:");
      if (end < 0) {
        throw new InvalidArgumentException("address \"" + a + "\": want host:port", "address");
      }
      host = a.substring(1, end);
      port = a.substring(end + 2);
    } else {
      int i = a.lastIndexOf(':');
      if (i <= 0 || a.indexOf(':') != i) {
        throw new InvalidArgumentException("address \"" + a + "\": want host:port", "address");
      }
      host = a.substring(0, i);
      port = a.substring(i + 1);
    }
    int p;
    try {
      p = Integer.parseInt(port);
    } catch (NumberFormatException e) {
      throw new InvalidArgumentException("address \"" + a + "\": bad port", "address");
    }
    if (p < 1 || p > 65535) {
      throw new InvalidArgumentException("address \"" + a + "\": port out of range", "address");
    }
    return new HostAndPort(host, p);
  }

  /**
   * connect opens a new connection and authenticates it (AUTH before any
   * other command, as fencerd requires with --requirepass or --users). A
   * failure to connect throws {@link ConnectFailure} (nothing was sent);
   * refused credentials or TLS throw the client's exceptions.
   */
  Connection connect(long timeoutMs) throws ConnectFailure {
    FencerClient.Config cfg = client.cfg;
    int t = (int) Math.max(1, Math.min(timeoutMs, Integer.MAX_VALUE));
    DefaultJedisClientConfig.Builder b = DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(t)
        .socketTimeoutMillis(t)
        .clientSetInfoConfig(ClientSetInfoConfig.DISABLED);
    if (cfg.password != null) {
      b.user(cfg.user).password(cfg.password);
    }
    if (client.isClosed()) {
      throw client.closedException();
    }
    Connection c;
    try {
      c = new Connection(() -> socket(t), b.build());
    } catch (JedisDataException e) {
      Failure f = Failure.reply(e);
      if (f.transientFailure) {
        throw new ConnectFailure(f.error);
      }
      throw f.error;
    } catch (JedisConnectionException e) {
      if (Failure.tlsRefused(e)) {
        throw Failure.network(e, false).error;
      }
      throw new ConnectFailure(e);
    } catch (RuntimeException e) {
      throw new ConnectFailure(e);
    }
    open.add(c);
    if (client.isClosed()) {
      discard(c);
      throw client.closedException();
    }
    return c;
  }

  /**
   * socket dials the node, over TLS if the client was given a context: the
   * handshake runs here, so that a certificate that does not verify fails
   * before anything is sent.
   */
  Socket socket(int timeoutMs) {
    FencerClient.Config cfg = client.cfg;
    Socket s = new Socket();
    try {
      s.setTcpNoDelay(true);
      s.setKeepAlive(true);
      s.connect(new InetSocketAddress(hostAndPort.getHost(), hostAndPort.getPort()), timeoutMs);
      s.setSoTimeout(timeoutMs);
      if (cfg.sslSocketFactory == null) {
        return s;
      }
      SSLSocket t = (SSLSocket) cfg.sslSocketFactory.createSocket(s, hostAndPort.getHost(), hostAndPort.getPort(), true);
      t.setSSLParameters(cfg.sslParameters());
      t.setSoTimeout(timeoutMs);
      t.startHandshake();
      return t;
    } catch (IOException e) {
      try {
        s.close();
      } catch (IOException ce) {
        e.addSuppressed(ce);
      }
      throw new JedisConnectionException(e);
    }
  }

  /** borrow returns an idle connection, or a new one. */
  Connection borrow(long timeoutMs) throws ConnectFailure {
    for (Connection c; (c = idle.pollFirst()) != null; ) {
      if (!c.isBroken() && c.isConnected()) {
        return c;
      }
      discard(c);
    }
    return connect(timeoutMs);
  }

  /** giveBack returns a healthy connection for the next request. */
  void giveBack(Connection c) {
    if (client.isClosed() || c.isBroken()) {
      discard(c);
      return;
    }
    idle.addFirst(c);
    if (client.isClosed() && idle.remove(c)) {
      discard(c);
    }
  }

  /** discard closes c at once, whatever thread is reading from it. */
  void discard(Connection c) {
    open.remove(c);
    try {
      c.forceDisconnect();
    } catch (IOException | RuntimeException e) {
      // closing: nothing to do
    }
  }

  void closeAll() {
    for (Connection c; (c = idle.pollFirst()) != null; ) {
      discard(c);
    }
    for (Connection c : open) {
      discard(c);
    }
  }

  /** ConnectFailure is a failure before the command was sent: nothing can have taken effect. */
  static final class ConnectFailure extends Exception {
    private static final long serialVersionUID = 1L;

    ConnectFailure(Throwable cause) {
      super("connecting: " + cause.getMessage(), cause);
    }
  }
}
