package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The client's side of the local protocol against a scripted daemon: the
 * frames it writes (CONSUMED when the application took what was read, before
 * it waits; nothing to a held destination) and how it takes what a daemon
 * may send (another version, completions, connection-level errors, a lost
 * connection).
 */
@Timeout(60)
class ProtocolTest {
  private FakeDaemon daemon;

  @BeforeEach
  void start() throws Exception {
    daemon = new FakeDaemon();
  }

  @AfterEach
  void stop() throws Exception {
    daemon.close();
  }

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void helloIsVersionTwoAndWelcomeIsTaken() throws Exception {
    try (Client c = daemon.connect(new ConnectOptions().clientName("tester"), 4096)) {
      assertEquals("fake", c.nodeName());
      assertEquals(4096, c.maxMessageSize());
    }
  }

  @Test
  void aFrameOfAnotherVersionIsAProtocolErrorNamingBothVersions() throws Exception {
    CompletableFuture<RdmamsgException> failed = CompletableFuture.supplyAsync(() -> {
      try {
        Client.connect(daemon.socket.toString()).close();
        return null;
      } catch (RdmamsgException e) {
        return e;
      }
    });
    daemon.accept();
    FakeDaemon.Frame hello = daemon.read();
    assertEquals(2, hello.version());
    assertEquals(Frames.HELLO, hello.kind());
    daemon.frame(1, Frames.WELCOME, FakeDaemon.body(4096, "old"));
    RdmamsgException e = failed.get(10, TimeUnit.SECONDS);
    assertNotNull(e, "connect accepted a version 1 WELCOME");
    assertEquals(Errc.PROTOCOL_ERROR, e.errc());
    assertTrue(e.getMessage().contains("version 1") && e.getMessage().contains("client 2"),
        e.getMessage());
  }

  @Test
  void consumedIsSentOnceEverythingReadWasTakenAndCountsDeliveries() throws Exception {
    try (Client c = daemon.connect()) {
      for (int i = 1; i <= 3; i++) daemon.deliver("beta", "out", "inbox", "m" + i);

      // Nothing taken yet: the client says nothing.
      assertNull(daemon.read(Duration.ofMillis(200)));
      Message first = c.receive(Duration.ofSeconds(10));
      assertEquals("m1", first.text());
      assertEquals("beta", first.srcNode());
      assertEquals("out", first.srcService());
      assertEquals("inbox", first.service());
      // Three were read in one go (they were there together) or the client waits for
      // more: either way, what it reports never exceeds what the application took.
      List<Long> reported = new ArrayList<>();
      for (FakeDaemon.Frame f; (f = daemon.read(Duration.ofMillis(200))) != null;) {
        assertEquals(Frames.CONSUMED, f.kind());
        reported.add(f.u64(0));
      }
      assertTrue(reported.stream().allMatch(n -> n <= 1), reported.toString());
      assertEquals("m2", c.receive(Duration.ofSeconds(10)).text());
      assertEquals("m3", c.receive(Duration.ofSeconds(10)).text());
      // The last one taken empties what was read: CONSUMED 3 at once.
      FakeDaemon.Frame f;
      do {
        f = daemon.read();
        assertEquals(Frames.CONSUMED, f.kind());
      } while (f.u64(0) < 3);
      assertEquals(3, f.u64(0));
      assertNull(c.receive(Duration.ZERO));
      assertNull(daemon.read(Duration.ofMillis(200)), "CONSUMED repeated with nothing new");
    }
  }

  @Test
  void withExplicitConfirmationConsumedWaitsForConfirmReceived() throws Exception {
    try (Client c = daemon.connect()) {
      c.setConfirmOnReceive(false);
      daemon.deliver("beta", "", "inbox", "one");
      assertEquals("one", c.receive(Duration.ofSeconds(10)).text());
      assertNull(c.receive(Duration.ofMillis(100)));
      assertNull(daemon.read(Duration.ofMillis(200)), "consumed before confirmReceived");
      c.confirmReceived();
      FakeDaemon.Frame f = daemon.read();
      assertEquals(Frames.CONSUMED, f.kind());
      assertEquals(1, f.u64(0));
    }
  }

  @Test
  void closingReportsWhatWasTakenThenSaysBye() throws Exception {
    Client c = daemon.connect();
    daemon.deliver("beta", "", "inbox", "one");
    daemon.deliver("beta", "", "inbox", "two");
    assertEquals("one", c.receive(Duration.ofSeconds(10)).text());
    assertTrue(Wait.until(() -> {
      c.processIo();
      return c.available() == 1; // both read, one taken
    }));
    c.close();
    FakeDaemon.Frame f = daemon.read();
    assertEquals(Frames.CONSUMED, f.kind());
    assertEquals(1, f.u64(0));
    assertEquals(Frames.BYE, daemon.read().kind());
    assertTrue(daemon.closedByClient());
    RdmamsgException e = assertThrows(RdmamsgException.class, () -> c.send("b", "s", "x"));
    assertEquals(Errc.NOT_CONNECTED, e.errc());
  }

  @Test
  void aHeldDestinationTakesNothingUntilResumedWhileOthersFlow() throws Exception {
    try (Client c = daemon.connect()) {
      daemon.hold("beta", "slow");
      while (!c.isHeld("beta", "slow")) c.receive(Duration.ofMillis(10));
      assertEquals(Client.WOULD_BLOCK, c.trySend("beta", "slow", text("no")));
      long fast = c.trySend("beta", "fast", text("yes"));
      assertEquals(1, fast);
      c.flush(Duration.ofSeconds(10));
      FakeDaemon.Frame f = daemon.read();
      assertEquals(Frames.SEND, f.kind());
      assertEquals(1, f.u64(0));
      assertEquals("beta", f.str8(8));
      assertEquals("fast", f.str8(13));

      // send() waits for the RESUME, reading meanwhile.
      CompletableFuture<Long> blocked = CompletableFuture.supplyAsync(() -> {
        try {
          long id = c.send("beta", "slow", text("later"));
          c.flush();
          return id;
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
      });
      assertNull(daemon.read(Duration.ofMillis(300)), "a held destination was sent to");
      assertFalse(blocked.isDone());
      daemon.resume("beta", "slow");
      assertEquals(2, blocked.get(10, TimeUnit.SECONDS));
      f = daemon.read();
      assertEquals(Frames.SEND, f.kind());
      assertEquals(2, f.u64(0));
      assertEquals("slow", f.str8(13));
      assertFalse(c.isHeld("beta", "slow"));
    }
  }

  @Test
  void completionsComeFromAckRangesAndErrorsToPollFuturesAndTheListener() throws Exception {
    try (Client c = daemon.connect()) {
      for (int i = 0; i < 4; i++) c.send("beta", "svc", text("m" + i));
      CompletableFuture<Completion> fifth = c.sendAsync("beta", "svc", text("m4"));
      c.flush(Duration.ofSeconds(10));
      for (int i = 0; i < 5; i++) assertEquals(Frames.SEND, daemon.read().kind());
      assertEquals(5, c.inFlight());
      daemon.ack(1, 2);
      daemon.error(3, Errc.UNKNOWN_SERVICE, Frames.SEND, "no listener for svc on beta");
      daemon.ack(4, 2);
      Completion one = c.waitCompletion(Duration.ofSeconds(10));
      assertEquals(new Completion(1, Errc.OK, ""), one);
      assertEquals(2, c.waitCompletion(Duration.ofSeconds(10)).msgId());
      Completion three = c.waitCompletion(Duration.ofSeconds(10));
      assertEquals(3, three.msgId());
      assertEquals(Errc.UNKNOWN_SERVICE, three.errc());
      assertTrue(three.message().contains("svc"));
      assertEquals(4, c.waitCompletion(Duration.ofSeconds(10)).msgId());
      assertEquals(new Completion(5, Errc.OK, ""), fifth.get(10, TimeUnit.SECONDS));
      assertNull(c.pollCompletion(), "the future's completion also went to the queue");
      assertEquals(0, c.inFlight());

      List<Completion> heard = new ArrayList<>();
      c.setCompletionListener(heard::add);
      c.send("beta", "svc", text("m5"));
      c.flush(Duration.ofSeconds(10));
      daemon.read();
      daemon.error(6, Errc.PERMISSION_DENIED, Frames.SEND, "not allowed to send to beta/svc");
      while (heard.isEmpty()) c.receive(Duration.ofMillis(10));
      assertEquals(List.of(new Completion(6, Errc.PERMISSION_DENIED,
          "not allowed to send to beta/svc")), heard);
    }
  }

  @Test
  void aFutureInTheMiddleOfAnAckRangeGetsItsCompletionAndTheRestQueue() throws Exception {
    try (Client c = daemon.connect()) {
      c.send("beta", "svc", text("1"));
      c.send("beta", "svc", text("2"));
      CompletableFuture<Completion> third = c.sendAsync("beta", "svc", text("3"));
      c.send("beta", "svc", text("4"));
      c.send("beta", "svc", text("5"));
      c.flush(Duration.ofSeconds(10));
      for (int i = 0; i < 5; i++) assertEquals(Frames.SEND, daemon.read().kind());
      daemon.ack(1, 5);
      assertEquals(new Completion(3, Errc.OK, ""), third.get(10, TimeUnit.SECONDS));
      List<Long> polled = new ArrayList<>();
      for (Completion x; (x = c.pollCompletion()) != null;) polled.add(x.msgId());
      assertEquals(List.of(1L, 2L, 4L, 5L), polled);
      assertEquals(0, c.inFlight());
    }
  }

  @Test
  void requestErrorsAreThrownNamingTheReason() throws Exception {
    try (Client c = daemon.connect()) {
      CompletableFuture<RdmamsgException> register = CompletableFuture.supplyAsync(() -> {
        try {
          c.register("taken");
          return null;
        } catch (RdmamsgException e) {
          return e;
        }
      });
      assertEquals(Frames.REGISTER, daemon.read().kind());
      daemon.error(0, Errc.DUPLICATE_SERVICE, Frames.REGISTER, "taken is registered");
      RdmamsgException e = register.get(10, TimeUnit.SECONDS);
      assertEquals(Errc.DUPLICATE_SERVICE, e.errc());
      assertEquals("duplicate_service: taken is registered", e.getMessage());
      assertTrue(c.isOpen());
    }
  }

  @Test
  void aConnectionLevelErrorClosesWithItsReason() throws Exception {
    try (Client c = daemon.connect()) {
      CompletableFuture<Completion> f = c.sendAsync("beta", "svc", text("x"));
      daemon.error(0, Errc.SHUTTING_DOWN, 0, "rdmamsgd on fake is stopping");
      RdmamsgException e = assertThrows(RdmamsgException.class,
          () -> c.receive(Duration.ofSeconds(10)));
      assertEquals(Errc.SHUTTING_DOWN, e.errc());
      ExecutionException failed = assertThrows(ExecutionException.class,
          () -> f.get(10, TimeUnit.SECONDS));
      assertEquals(e, failed.getCause());
      assertFalse(c.isOpen());
    }
  }

  @Test
  void aLostDaemonFailsEveryWaitAndFuture() throws Exception {
    try (Client c = daemon.connect(new ConnectOptions().ioThread(true), 1 << 20)) {
      CompletableFuture<Completion> f = c.sendAsync("beta", "svc", text("x"));
      assertEquals(Frames.SEND, daemon.read().kind()); // the I/O thread wrote it
      daemon.drop();
      ExecutionException failed = assertThrows(ExecutionException.class,
          () -> f.get(10, TimeUnit.SECONDS));
      RdmamsgException e = (RdmamsgException) failed.getCause();
      assertTrue(e.errc() == Errc.NOT_CONNECTED || e.errc() == Errc.IO_ERROR, e.toString());
      assertEquals(e, assertThrows(RdmamsgException.class,
          () -> c.waitCompletion(Duration.ofSeconds(10))));
      assertEquals(e, assertThrows(RdmamsgException.class, () -> c.send("b", "s", "y")));
    }
  }

  @Test
  void malformedFramesAreProtocolErrors() throws Exception {
    try (Client c = daemon.connect()) {
      daemon.frame(Frames.ACK, FakeDaemon.body(2, 1L, 1)); // two ranges announced, one there
      RdmamsgException e = assertThrows(RdmamsgException.class,
          () -> c.receive(Duration.ofSeconds(10)));
      assertEquals(Errc.PROTOCOL_ERROR, e.errc());
      assertTrue(e.getMessage().contains("ack"), e.getMessage());
    }
  }

  @Test
  void invalidNamesAndOversizedPayloadsAreRefusedBeforeAnythingIsSent() throws Exception {
    try (Client c = daemon.connect(new ConnectOptions(), 16)) {
      assertEquals(Errc.BAD_REQUEST,
          assertThrows(RdmamsgException.class, () -> c.send("beta", "bad name!", "x")).errc());
      assertEquals(Errc.BAD_REQUEST,
          assertThrows(RdmamsgException.class, () -> c.register("")).errc());
      RdmamsgException big =
          assertThrows(RdmamsgException.class, () -> c.send("beta", "svc", new byte[17]));
      assertEquals(Errc.TOO_LARGE, big.errc());
      assertTrue(big.getMessage().contains("17") && big.getMessage().contains("16"));
      c.flush(Duration.ofSeconds(1));
      assertNull(daemon.read(Duration.ofMillis(100)));
    }
  }
}
