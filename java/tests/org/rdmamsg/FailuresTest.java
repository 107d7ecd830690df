package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every failure a real daemon names reaches the Java application with its
 * code and an explanation naming the node or service at fault; failures the
 * library finds itself are named the same way. (protocol_error,
 * permission_denied and busy from the wire are in ProtocolTest: a daemon
 * never sends a malformed frame, and root passes every local policy.)
 */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class FailuresTest {
  static final Duration WAIT = Duration.ofSeconds(20);

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  private static void assertNames(Completion c, Errc errc, String... words) {
    assertEquals(errc, c.errc(), c.toString());
    for (String w : words) assertTrue(c.message().contains(w), c + " does not name " + w);
  }

  @Test
  void unknownNodesAndServicesAreNamed() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client c = mesh.connect("alpha")) {
      assertNames(c.sendAndWait("gamma", "x", text("hi"), WAIT), Errc.UNKNOWN_NODE, "gamma");
      assertNames(c.sendAndWait("beta", "nobody", text("hi"), WAIT), Errc.UNKNOWN_SERVICE,
          "nobody", "beta");
      assertNames(c.sendAndWait("alpha", "nobody", text("hi"), WAIT), Errc.UNKNOWN_SERVICE,
          "nobody", "alpha");
    }
  }

  @Test
  void tooLargeIsRefusedByTheClientAndByTheReceivingDaemon() throws Exception {
    Mesh mesh = Mesh.builder("alpha", "beta").with("alpha", "max_message_size: 1MiB")
        .with("beta", "max_message_size: 64KiB").start();
    try (Client listener = mesh.connect("beta"); Client c = mesh.connect("alpha")) {
      listener.register("inbox");
      RdmamsgException e = assertThrows(RdmamsgException.class,
          () -> c.send("beta", "inbox", new byte[(1 << 20) + 1]));
      assertEquals(Errc.TOO_LARGE, e.errc());
      assertTrue(e.getMessage().contains(String.valueOf((1 << 20) + 1)), e.getMessage());
      // Within alpha's limit, beyond beta's: beta's daemon refuses it.
      assertEquals(Errc.TOO_LARGE,
          c.sendAndWait("beta", "inbox", ByteBuffer.allocate(100_000), WAIT).errc());
      assertNull(listener.receive(Duration.ZERO));
    }
  }

  @Test
  void badRequestsAndDuplicateServicesAreRefused() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client c = mesh.connect("alpha"); Client other = mesh.connect("alpha")) {
      RdmamsgException e = assertThrows(RdmamsgException.class,
          () -> c.send("beta", "bad name!", "x"));
      assertEquals(Errc.BAD_REQUEST, e.errc());
      assertTrue(e.getMessage().contains("bad name!"));
      assertEquals(Errc.BAD_REQUEST,
          assertThrows(RdmamsgException.class, () -> c.send("", "x", "x")).errc());
      // A sender service this client did not register: the daemon refuses the message.
      c.register("mine");
      assertEquals(Errc.BAD_REQUEST,
          c.sendAsync("beta", "x", text("x"), "notmine").get().errc());
      e = assertThrows(RdmamsgException.class, () -> other.register("mine"));
      assertEquals(Errc.DUPLICATE_SERVICE, e.errc());
      assertTrue(e.getMessage().contains("mine"), e.getMessage());
      assertTrue(other.isOpen(), "a refused request closed the connection");
      other.register("yours");
    }
  }

  @Test
  void noDaemonIsAnIoErrorNamingTheSocketAndAClosedClientIsNotConnected() throws Exception {
    Mesh mesh = Mesh.pair();
    String missing = mesh.dir.resolve("nothing.sock").toString();
    RdmamsgException e = assertThrows(RdmamsgException.class, () -> Client.connect(missing));
    assertEquals(Errc.IO_ERROR, e.errc());
    assertTrue(e.getMessage().contains("nothing.sock"), e.getMessage());

    Client c = mesh.connect("alpha");
    c.close();
    c.close();
    assertFalse(c.isOpen());
    assertEquals(Errc.NOT_CONNECTED,
        assertThrows(RdmamsgException.class, () -> c.send("beta", "x", "x")).errc());
    assertEquals(Errc.NOT_CONNECTED,
        assertThrows(RdmamsgException.class, () -> c.receive(WAIT)).errc());
  }

  @Test
  void aStoppedPeerIsUnreachableAndAStoppingDaemonSaysSo() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client c = mesh.connect("alpha")) {
      assertEquals(0, mesh.stop("beta"));
      assertNames(c.sendAndWait("beta", "svc", text("hi"), WAIT), Errc.PEER_UNREACHABLE, "beta");

      mesh.process("alpha").destroy(); // SIGTERM while the client is connected
      RdmamsgException e = assertThrows(RdmamsgException.class, () -> c.receive(WAIT));
      assertEquals(Errc.SHUTTING_DOWN, e.errc(), e.toString());
      assertTrue(e.getMessage().contains("alpha"), e.getMessage());
    }
  }

  @Test
  void aMessageNobodyTakesTimesOutAndAReceiveWithoutMessagesReturnsNull() throws Exception {
    Mesh mesh = Mesh.builder("alpha", "beta").with("message_timeout: 1s").start();
    try (Client listener = mesh.connect("beta"); Client c = mesh.connect("alpha")) {
      listener.register("stuck"); // and never receives
      long t0 = System.nanoTime();
      assertNull(listener.receive(Duration.ofMillis(50)));
      assertTrue(System.nanoTime() - t0 >= Duration.ofMillis(50).toNanos());
      Completion done = c.sendAndWait("beta", "stuck", text("hi"), WAIT);
      assertEquals(Errc.TIMEOUT, done.errc(), done.toString());
    }
  }
}
