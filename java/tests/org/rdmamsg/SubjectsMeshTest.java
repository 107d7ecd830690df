package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Subjects between two real daemons over softrdma, through the Java client's API. */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class SubjectsMeshTest {
  static final Duration WAIT = Duration.ofSeconds(20);
  private static final Pattern INTEREST = Pattern.compile(
      "\\{\"patterns\":(\\d+),\"peer\":\"([a-z]+)\"\\}"
      + "|\\{\"peer\":\"([a-z]+)\",\"patterns\":(\\d+)\\}");

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** The patterns {@code peer} told {@code client}'s daemon it is interested in. */
  private static int interest(Client client, String peer) throws RdmamsgException {
    Matcher m = INTEREST.matcher(client.status().replace(" ", ""));
    while (m.find()) {
      if (peer.equals(m.group(2))) return Integer.parseInt(m.group(1));
      if (peer.equals(m.group(3))) return Integer.parseInt(m.group(4));
    }
    return 0;
  }

  @Test
  void aPublishReachesTheSubscriberOnTheOtherNodeAndCompletesWithItsCounts() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client sub = mesh.connect("beta"); Client pub = mesh.connect("alpha")) {
      assertEquals(1, sub.subscribe("orders.*.eu"));
      assertTrue(Wait.until(() -> interest(pub, "beta") == 1), "beta's interest never came");
      long id = pub.publish("orders.x.eu", bytes("first"));
      assertEquals(1, id);
      long none = pub.publish("orders.x.us", bytes("nobody"));
      pub.flush(WAIT);
      Message m = sub.receive(WAIT);
      assertNotNull(m, "nothing arrived");
      assertEquals(new Message("alpha", "", "", "orders.x.eu", "", 1, 0,
          java.nio.ByteBuffer.wrap(bytes("first"))), m);
      Completion a = pub.waitCompletion(WAIT);
      Completion b = pub.waitCompletion(WAIT);
      Completion done = a.msgId() == id ? a : b;
      Completion nobody = a.msgId() == id ? b : a;
      assertEquals(new Completion(id, Errc.OK, "", 1, 1, 0), done);
      assertEquals(none, nobody.msgId());
      assertEquals(Errc.NO_SUBSCRIBERS, nobody.errc());
      assertEquals(0, pub.inFlight());
      assertEquals(Errc.BAD_REQUEST,
          assertThrows(RdmamsgException.class, () -> pub.publish("orders.>", bytes("x"))).errc());
      sub.unsubscribe(1);
      assertTrue(Wait.until(() -> interest(pub, "beta") == 0), "beta's interest stayed");
    }
  }

  @Test
  void aRequestGetsTheReplyOfAResponderOnTheOtherNode() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client responder = mesh.connect("beta"); Client requester = mesh.connect("alpha")) {
      responder.subscribe("time.now", SubscribeOptions.defaults().withGroup("clocks"));
      assertTrue(Wait.until(() -> interest(requester, "beta") == 1), "no interest came");
      requester.register("inbox");
      responder.send("alpha", "inbox", "before the reply");
      responder.flush(WAIT);
      CompletableFuture<Long> answered = CompletableFuture.supplyAsync(() -> {
        try {
          Message request = responder.receive(WAIT);
          assertEquals("time.now", request.subject());
          assertTrue(request.replyTo().startsWith("alpha/"), request.replyTo());
          long id = responder.reply(request, bytes("noon"));
          Completion c = responder.waitCompletion(WAIT); // the send's, then the reply's
          while (c != null && c.msgId() != id) c = responder.waitCompletion(WAIT);
          assertNotNull(c, "the reply was not confirmed");
          assertTrue(c.ok(), c.toString());
          return id;
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
      });
      Message reply = requester.requestAndWait("time.now", bytes("?"), WAIT);
      assertEquals("noon", reply.text());
      assertEquals("beta", reply.srcNode());
      assertEquals("before the reply", requester.receive(WAIT).text(),
          "requestAndWait took a message that was not its reply");
      assertNull(requester.receive(Duration.ZERO));
      // Taken out of turn, the reply is confirmed once the message before it was taken too.
      assertEquals(2, answered.get(WAIT.toSeconds(), TimeUnit.SECONDS));
      RdmamsgException e = assertThrows(RdmamsgException.class,
          () -> requester.requestAndWait("time.nowhere", bytes("?"), WAIT));
      assertEquals(Errc.NO_RESPONDERS, e.errc());
      assertEquals(0, requester.inFlight());
    }
  }
}
