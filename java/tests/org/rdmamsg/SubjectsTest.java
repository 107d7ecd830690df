package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/**
 * Subjects against a scripted daemon, frames in and frames out: a SUB
 * answered by SUBSCRIBED or by the ERROR for its id, PUB_ACK's counts in the
 * completion, MSG and REPLY counted in CONSUMED, a request's reply from
 * receive or from requestAndWait (which leaves the other messages queued),
 * and a reply to a request's token.
 */
@Timeout(60)
class SubjectsTest {
  private static final long SECONDS = FakeDaemon.WAIT.toSeconds();
  private static final Duration WAIT = FakeDaemon.WAIT;
  private ClientParts parts;
  private FakeDaemon daemon;

  @BeforeEach
  void connect() throws Exception {
    parts = new ClientParts();
    daemon = parts.daemon;
    parts.handshake.welcome(4096, "fake");
  }

  @AfterEach
  void close() throws Exception {
    parts.close();
  }

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  /** A blocking call of the parts in another thread, as an application's. */
  private <T> CompletableFuture<T> async(ClientParts.Call<T> call) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return parts.locked(call);
      } catch (RdmamsgException e) {
        throw new CompletionException(e);
      }
    });
  }

  private static RdmamsgException failure(CompletableFuture<?> f) throws Exception {
    try {
      f.get(SECONDS, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return assertInstanceOf(RdmamsgException.class, e.getCause());
    }
    return fail("it did not fail");
  }

  private static RdmamsgException refused(Errc errc, Executable call) {
    RdmamsgException e = assertThrows(RdmamsgException.class, call);
    assertEquals(errc, e.errc());
    return e;
  }

  /** The next frame the client writes, which is of {@code kind}. */
  private FakeDaemon.Frame expect(int kind) throws Exception {
    parts.locked(() -> parts.engine.await(() -> parts.transport.unwritten() == 0,
        Deadline.after(WAIT)));
    FakeDaemon.Frame f = daemon.read();
    assertEquals(Frames.kindName(kind), Frames.kindName(f.kind()));
    return f;
  }

  /** The payload of a client's frame, from {@code at} to its end. */
  private static String rest(FakeDaemon.Frame f, int at) {
    byte[] b = new byte[f.body().limit() - at];
    f.body().get(at, b);
    return new String(b, StandardCharsets.UTF_8);
  }

  private Message receive() throws Exception {
    Message m = parts.locked(() -> parts.receiver.receiveUntil(Deadline.after(WAIT)));
    assertTrue(m != null, "no message came");
    return m;
  }

  private Completion completion() throws Exception {
    assertTrue(parts.locked(() -> parts.engine.await(() -> !parts.completions.isEmpty(),
        Deadline.after(WAIT))), "no completion came");
    return parts.completions.poll();
  }

  /** Reads the client's CONSUMED frames until one says {@code count}; fails on another frame. */
  private void consumed(long count) throws Exception {
    for (;;) {
      FakeDaemon.Frame f = daemon.read();
      assertEquals(Frames.CONSUMED, f.kind());
      assertTrue(f.u64(0) <= count, "CONSUMED " + f.u64(0) + ", more than taken");
      if (f.u64(0) == count) return;
    }
  }

  private void pubAck(long id, Errc errc, int matched, int taken, int dropped, String text)
      throws Exception {
    byte[] t = text.getBytes(StandardCharsets.UTF_8);
    daemon.frame(Frames.PUB_ACK, FakeDaemon.body(id, (short) errc.value(), matched, taken,
        dropped, (short) t.length, t));
  }

  private static byte[] msg(long subId, String node, String subject, String replyTo, String p) {
    return FakeDaemon.body(subId, node, subject, replyTo, p.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] reply(long requestId, String node, String p) {
    return FakeDaemon.body(requestId, node, p.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] deliver(String p) {
    return FakeDaemon.body("beta", "out", "inbox", p.getBytes(StandardCharsets.UTF_8));
  }

  // --- subscriptions --------------------------------------------------------------------

  @Test
  void aSubscribeIsAnsweredBySubscribedOrByTheErrorForItsId() throws Exception {
    SubscribeOptions workers = SubscribeOptions.defaults().withGroup("workers")
        .withPolicy(SlowConsumer.BLOCK).withPendingLimit(7);
    CompletableFuture<Long> first =
        async(() -> parts.subjects.subscribe("orders.*.eu", workers, WAIT));
    FakeDaemon.Frame sub = expect(Frames.SUB);
    assertEquals(1, sub.u64(0));
    assertEquals(1, sub.body().get(8)); // block
    assertEquals(0, sub.body().get(9));
    assertEquals(7, sub.body().getInt(10));
    assertEquals("workers", sub.str8(14));
    assertEquals("orders.*.eu", sub.str8(22));
    assertEquals(22 + 12, sub.body().limit());
    daemon.frame(Frames.SUBSCRIBED, FakeDaemon.body(1L));
    assertEquals(1, first.get(SECONDS, TimeUnit.SECONDS));

    CompletableFuture<Long> second = async(() -> parts.subjects.subscribe("orders.>",
        SubscribeOptions.defaults(), WAIT));
    sub = expect(Frames.SUB);
    assertEquals(2, sub.u64(0));
    assertEquals(0, sub.body().get(8)); // drop
    assertEquals(0, sub.body().getInt(10)); // the daemon's limit
    assertEquals("", sub.str8(14));
    daemon.error(2, Errc.BUSY, Frames.SUB, "max_subscriptions (1) reached");
    RdmamsgException busy = failure(second);
    assertEquals(Errc.BUSY, busy.errc());
    assertEquals("max_subscriptions (1) reached", busy.detail());

    // Refused by the library: nothing sent, no id used.
    refused(Errc.BAD_REQUEST, () -> parts.locked(() -> parts.subjects.subscribe("orders..eu",
        SubscribeOptions.defaults(), WAIT)));
    refused(Errc.BAD_REQUEST, () -> parts.locked(() -> parts.subjects.subscribe("orders.*",
        SubscribeOptions.defaults().withGroup("bad group"), WAIT)));
    CompletableFuture<Long> third = async(() -> parts.subjects.subscribe("x",
        SubscribeOptions.defaults(), WAIT));
    assertEquals(3, expect(Frames.SUB).u64(0));
    daemon.frame(Frames.SUBSCRIBED, FakeDaemon.body(3L));
    assertEquals(3, third.get(SECONDS, TimeUnit.SECONDS));

    parts.locked(() -> {
      parts.subjects.unsubscribe(1);
      return null;
    });
    assertEquals(1, expect(Frames.UNSUB).u64(0));
    for (long notHeld : new long[] {1, 2, 9}) {
      refused(Errc.BAD_REQUEST, () -> parts.locked(() -> {
        parts.subjects.unsubscribe(notHeld);
        return null;
      }));
    }
    assertNull(daemon.read(Duration.ofMillis(100)), "a refused call sent a frame");
  }

  @Test
  void aSubscribeNotAnsweredInTimeIsUndoneAndItsLateAnswerDropped() throws Exception {
    RdmamsgException e = refused(Errc.TIMEOUT, () -> parts.locked(() ->
        parts.subjects.subscribe("orders.>", SubscribeOptions.defaults(),
            Duration.ofMillis(100))));
    assertTrue(e.detail().contains("orders.>"), e.detail());
    assertEquals(1, expect(Frames.SUB).u64(0));
    assertEquals(1, expect(Frames.UNSUB).u64(0));
    daemon.frame(Frames.SUBSCRIBED, FakeDaemon.body(1L)); // late: dropped, not an error
    CompletableFuture<Long> next = async(() -> parts.subjects.subscribe("orders.>",
        SubscribeOptions.defaults(), WAIT));
    assertEquals(2, expect(Frames.SUB).u64(0));
    daemon.frame(Frames.SUBSCRIBED, FakeDaemon.body(2L));
    assertEquals(2, next.get(SECONDS, TimeUnit.SECONDS));
    assertNull(parts.engine.failure());
  }

  // --- deliveries -----------------------------------------------------------------------

  @Test
  void msgAndReplyAreDeliveriesCountedInConsumed() throws Exception {
    daemon.frames(Frames.DELIVER, deliver("d"),
        Frames.MSG, msg(4, "beta", "orders.x.eu", "alpha/3/9", "m"),
        Frames.REPLY, reply(7, "gamma", "r"));
    Message d = receive();
    assertEquals("d", d.text());
    assertEquals("", d.subject());
    assertEquals(0, d.subscription());
    Message m = receive();
    assertEquals(new Message("beta", "", "", "orders.x.eu", "alpha/3/9", 4, 0, text("m")), m);
    Message r = receive();
    assertEquals(new Message("gamma", "", "", "", "", 0, 7, text("r")), r);
    consumed(3);
  }

  // --- publishing -----------------------------------------------------------------------

  @Test
  void aPublishCompletesWithItsPubAckAndItsCounts() throws Exception {
    assertEquals(1, parts.locked(() -> parts.subjects.publish("orders.x.eu", text("hello"))));
    FakeDaemon.Frame pub = expect(Frames.PUB);
    assertEquals(1, pub.u64(0));
    assertEquals(0, pub.body().getInt(8)); // a publish, not a request
    assertEquals("orders.x.eu", pub.str8(12));
    assertEquals("hello", rest(pub, 12 + 1 + 11));
    assertEquals(1, parts.completions.inFlight());
    pubAck(1, Errc.OK, 3, 2, 1, "");
    assertEquals(new Completion(1, Errc.OK, "", 3, 2, 1), completion());

    assertEquals(2, parts.locked(() -> parts.subjects.publish("orders.y", text(""))));
    expect(Frames.PUB);
    pubAck(2, Errc.NO_SUBSCRIBERS, 0, 0, 0, "no subscription in the mesh matches orders.y");
    Completion none = completion();
    assertEquals(Errc.NO_SUBSCRIBERS, none.errc());
    assertEquals("no subscription in the mesh matches orders.y", none.message());
    assertEquals(0, parts.completions.inFlight());

    // Refused by the library, using no id: the next message (a send) is 3.
    RdmamsgException bad = refused(Errc.BAD_REQUEST,
        () -> parts.locked(() -> parts.subjects.publish("orders.*", text("x"))));
    assertTrue(bad.detail().contains("wildcard"), bad.detail());
    refused(Errc.TOO_LARGE,
        () -> parts.locked(() -> parts.subjects.publish("orders.x", ByteBuffer.allocate(4097))));
    assertEquals(3, parts.locked(() ->
        parts.sender.send("beta", "inbox", text("s"), "", true, null)));
    assertEquals(3, expect(Frames.SEND).u64(0));
  }

  // --- requests -------------------------------------------------------------------------

  @Test
  void aRequestsReplyComesFromReceiveAndItsFailureAsACompletion() throws Exception {
    long id = parts.locked(() -> parts.subjects.request("time.now", text("?"),
        Duration.ofMillis(1500)));
    FakeDaemon.Frame pub = expect(Frames.PUB);
    assertEquals(id, pub.u64(0));
    assertEquals(1500, pub.body().getInt(8));
    daemon.frame(Frames.REPLY, reply(id, "beta", "noon"));
    Message r = receive();
    assertEquals(id, r.requestId());
    assertEquals("noon", r.text());
    assertEquals(0, parts.completions.inFlight(), "a reply settles its request");
    consumed(1);

    long lonely = parts.locked(() -> parts.subjects.request("time.nobody", text("?"),
        Duration.ofNanos(1)));
    assertEquals(1, expect(Frames.PUB).body().getInt(8), "rounded up to a millisecond");
    pubAck(lonely, Errc.NO_RESPONDERS, 0, 0, 0, "no subscription in the mesh matches");
    assertEquals(Errc.NO_RESPONDERS, completion().errc());
    assertTrue(parts.completions.isEmpty());
    for (Duration bad : new Duration[] {Duration.ZERO, Duration.ofMillis(-1),
             Duration.ofMillis(1L << 32)}) {
      refused(Errc.BAD_REQUEST,
          () -> parts.locked(() -> parts.subjects.request("time.now", text("?"), bad)));
    }
  }

  @Test
  void requestAndWaitTakesOnlyItsReplyAndLeavesTheOtherMessagesQueued() throws Exception {
    daemon.frame(Frames.DELIVER, deliver("d1"));
    CompletableFuture<Message> answer =
        async(() -> parts.subjects.requestAndWait("time.now", text("?"), WAIT));
    FakeDaemon.Frame pub = expect(Frames.PUB);
    long id = pub.u64(0);
    daemon.frames(Frames.MSG, msg(1, "beta", "orders.x", "", "m1"),
        Frames.REPLY, reply(id, "gamma", "noon"),
        Frames.DELIVER, deliver("d2"));
    Message r = answer.get(SECONDS, TimeUnit.SECONDS);
    assertEquals("noon", r.text());
    assertEquals(id, r.requestId());
    assertEquals(3, parts.inbox.size());
    // Nothing before the reply was taken: it does not count yet.
    assertNull(daemon.read(Duration.ofMillis(100)), "CONSUMED before d1 was taken");
    assertEquals("d1", receive().text());
    assertEquals("m1", receive().text());
    assertEquals("d2", receive().text());
    consumed(4);
    assertTrue(parts.completions.isEmpty());
    assertEquals(0, parts.completions.inFlight());
  }

  @Test
  void requestAndWaitThrowsWhyNoReplyCame() throws Exception {
    CompletableFuture<Message> answer =
        async(() -> parts.subjects.requestAndWait("time.now", text("?"), WAIT));
    long id = expect(Frames.PUB).u64(0);
    pubAck(id, Errc.NO_RESPONDERS, 0, 0, 0, "no subscription in the mesh matches time.now");
    RdmamsgException e = failure(answer);
    assertEquals(Errc.NO_RESPONDERS, e.errc());
    assertEquals("no subscription in the mesh matches time.now", e.detail());
    assertTrue(parts.completions.isEmpty(), "the failure was also queued as a completion");
    assertEquals(0, parts.completions.inFlight());
  }

  @Test
  void whenTheDaemonSaysNothingRequestAndWaitGivesUpAndALateReplyGoesToReceive()
      throws Exception {
    CompletableFuture<Message> answer = async(() ->
        parts.subjects.requestAndWait("time.now", text("?"), Duration.ofMillis(1)));
    long id = expect(Frames.PUB).u64(0);
    RdmamsgException e = failure(answer); // after the grace the daemon had to answer in
    assertEquals(Errc.TIMEOUT, e.errc());
    assertTrue(e.detail().contains("no outcome of request " + id), e.detail());
    daemon.frame(Frames.REPLY, reply(id, "beta", "late"));
    Message late = receive();
    assertEquals(id, late.requestId());
    assertEquals("late", late.text());
  }

  // --- replying -------------------------------------------------------------------------

  @Test
  void aReplyAnswersTheRequestsTokenAndCompletesLikeASend() throws Exception {
    daemon.frames(Frames.DELIVER, deliver("plain"),
        Frames.MSG, msg(2, "beta", "time.now", "beta/12/5", "?"));
    Message plain = receive();
    Message request = receive();
    refused(Errc.BAD_REQUEST,
        () -> parts.locked(() -> parts.subjects.reply(plain, text("no token"))));
    long id = parts.locked(() -> parts.subjects.reply(request, text("noon")));
    assertEquals(1, id, "a refused reply used an id");
    parts.locked(() -> parts.engine.await(() -> parts.transport.unwritten() == 0,
        Deadline.after(WAIT)));
    FakeDaemon.Frame respond;
    do {
      respond = daemon.read();
    } while (respond.kind() == Frames.CONSUMED);
    assertEquals(Frames.RESPOND, respond.kind());
    assertEquals(1, respond.u64(0));
    assertEquals("beta/12/5", respond.str8(8));
    assertEquals("noon", rest(respond, 8 + 1 + 9));
    daemon.ack(1, 1);
    assertEquals(new Completion(1, Errc.OK, ""), completion());
  }
}
