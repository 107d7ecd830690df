package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Confirmation on consumption: a message is confirmed to its sender only
 * once {@code receive} returned it (or, with explicit confirmation, once the
 * application said so with confirmReceived), not when the listener's library read it; messages
 * never taken fail back to their senders.
 */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class ConfirmationTest {
  static final Duration WAIT = Duration.ofSeconds(20);
  // How long a completion that must not come is waited for.
  static final Duration QUIET = Duration.ofMillis(500);

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void aMessageIsConfirmedOnlyAfterReceiveReturnedIt() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      long id = sender.send("beta", "inbox", "first");
      sender.flush(WAIT);
      // The listener's library has read it; the application has not taken it.
      assertTrue(Wait.until(() -> {
        listener.processIo();
        return listener.available() == 1;
      }), "the message did not reach the listener's library");
      assertNull(sender.waitCompletion(QUIET), "confirmed before the application took it");
      assertEquals("first", listener.receive(WAIT).text());
      assertEquals(new Completion(id, Errc.OK, ""), sender.waitCompletion(WAIT));
    }
  }

  @Test
  void withExplicitConfirmationTheApplicationSaysWhenItTookThem() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      listener.setConfirmOnReceive(false);
      sender.send("beta", "inbox", "a");
      sender.send("beta", "inbox", "b");
      sender.flush(WAIT);
      assertEquals("a", listener.receive(WAIT).text());
      assertEquals("b", listener.receive(WAIT).text());
      assertNull(sender.waitCompletion(QUIET), "confirmed before confirmReceived");
      listener.confirmReceived();
      assertTrue(sender.waitCompletion(WAIT).ok());
      Completion second = sender.waitCompletion(WAIT);
      assertNotNull(second);
      assertTrue(second.ok(), second.toString());
    }
  }

  @Test
  void messagesNeverTakenFailBackToTheirSender() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client sender = mesh.connect("alpha")) {
      Client listener = mesh.connect("beta");
      listener.register("inbox");
      long one = sender.send("beta", "inbox", "one");
      long two = sender.send("beta", "inbox", "two");
      sender.flush(WAIT);
      assertTrue(Wait.until(() -> {
        listener.processIo();
        return listener.available() == 2;
      }), "the messages did not reach the listener's library");
      assertEquals("one", listener.receive(WAIT).text());
      listener.close(); // "two" was read but never taken
      Completion a = sender.waitCompletion(WAIT);
      Completion b = sender.waitCompletion(WAIT);
      assertNotNull(a);
      assertNotNull(b);
      Completion first = a.msgId() == one ? a : b;
      Completion second = a.msgId() == one ? b : a;
      assertEquals(new Completion(one, Errc.OK, ""), first);
      assertEquals(two, second.msgId());
      assertEquals(Errc.UNKNOWN_SERVICE, second.errc(), second.toString());
      assertTrue(second.message().contains("inbox"), second.toString());
    }
  }
}
