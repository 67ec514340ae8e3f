package io.github.fencerlock.fencer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.Test;

/** AUTH (fencerd --requirepass, --users) and TLS (--tls-cert-file with a self-signed certificate made here with openssl). */
class SecurityTest {
  @Test
  void authWithAPasswordAndAUsersFile() throws Exception {
    Path users = Files.createTempFile("fencer-users", ".txt");
    Files.writeString(users, "admin secret *\njobs jobpass jobs/*\n");
    Servers.Proc node = Servers.startNode("--users", users.toString(), "--forward-user", "admin");
    String addr = node.addr();
    try {
      try (FencerClient c = FencerClient.builder(addr).auth("jobs", "jobpass").build()) {
        Servers.await("the node to serve", Duration.ofSeconds(20), () -> {
          try {
            c.status("jobs/x");
            return true;
          } catch (NoLeaderException | UncertainException e) {
            return false;
          }
        });
        try (Lease l = c.tryAcquire("jobs/a")) {
          assertTrue(l.token() > 0);
        }
        NoPermException e = assertThrows(NoPermException.class, () -> c.tryAcquire("other/a"));
        assertEquals("NOPERM", e.code());
      }
      long t0 = System.nanoTime();
      try (FencerClient c = FencerClient.builder(addr).auth("jobs", "wrong").failoverTimeout(Duration.ofSeconds(10)).build()) {
        AuthException e = assertThrows(AuthException.class, () -> c.tryAcquire("jobs/a"));
        assertEquals("WRONGPASS", e.code());
      }
      try (FencerClient c = FencerClient.connect(addr)) {
        AuthException e = assertThrows(AuthException.class, () -> c.tryAcquire("jobs/a"));
        assertEquals("NOAUTH", e.code());
      }
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) < 5000, "refused at once, not retried");
    } finally {
      node.kill();
    }
  }

  @Test
  void tlsWithASelfSignedCertificate() throws Exception {
    Path dir = Files.createTempDirectory("fencer-tls");
    Path cert = dir.resolve("cert.pem");
    Path key = dir.resolve("key.pem");
    Process p = new ProcessBuilder(List.of("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key.toString(), "-out", cert.toString(), "-days", "1",
        "-subj", "/CN=fencer-test", "-addext", "subjectAltName=IP:127.0.0.1,DNS:fencer.test"))
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    assertEquals(0, p.waitFor(), out);
    Servers.Proc node = Servers.startNode("--tls-cert-file", cert.toString(), "--tls-key-file", key.toString());
    String addr = node.addr();
    try {
      KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
      trust.load(null, null);
      try (InputStream in = Files.newInputStream(cert)) {
        trust.setCertificateEntry("fencer", CertificateFactory.getInstance("X.509").generateCertificate(in));
      }
      TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      tmf.init(trust);
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(null, tmf.getTrustManagers(), null);
      try (FencerClient c = FencerClient.builder(addr).tls(ctx).build()) {
        Servers.await("the node to serve", Duration.ofSeconds(20), () -> {
          try {
            c.status("tls");
            return true;
          } catch (NoLeaderException | UncertainException e) {
            return false;
          }
        });
      }
      try (FencerClient c = FencerClient.builder(addr).tls(ctx).build(); Lease l = c.tryAcquire("tls")) {
        assertTrue(l.token() > 0);
      }
      // A certificate that does not verify fails at once, without retrying.
      try (FencerClient c = FencerClient.builder(addr).tls(SSLContext.getDefault())
          .failoverTimeout(Duration.ofSeconds(10)).build()) {
        assertThrows(TlsException.class, () -> c.tryAcquire("tls"));
      }
      // The name is checked: the certificate names 127.0.0.1 and fencer.test.
      try (FencerClient c = FencerClient.builder("localhost:" + node.port).tls(ctx)
          .failoverTimeout(Duration.ofSeconds(10)).build()) {
        assertThrows(TlsException.class, () -> c.tryAcquire("tls"), "localhost is not a name the certificate holds");
      }
      // A plain client of a TLS node is not served.
      try (FencerClient c = FencerClient.builder(addr).failoverTimeout(Duration.ofMillis(1500))
          .requestTimeout(Duration.ofMillis(500)).build()) {
        assertThrows(FencerException.class, () -> c.tryAcquire("tls"));
      }
    } finally {
      node.kill();
    }
  }
}
