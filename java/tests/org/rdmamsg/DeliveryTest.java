package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/** Messages between two real daemons over softrdma, with every way of taking completions. */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class DeliveryTest {
  static final Duration WAIT = Duration.ofSeconds(20);

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void aMessageCrossesTheMeshAndItsCompletionComesBack() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      assertEquals("beta", listener.nodeName());
      assertTrue(listener.maxMessageSize() > 0);
      listener.register("inbox");
      sender.register("outbox");
      long id = sender.send("beta", "inbox", "héllo");
      assertEquals(1, id);
      sender.flush(WAIT); // sends are written in batches, or when the client waits
      Message m = listener.receive(WAIT);
      assertNotNull(m, "nothing arrived");
      assertEquals(new Message("alpha", "outbox", "inbox", text("héllo")), m);
      assertEquals("héllo", m.text());
      assertEquals(new Completion(id, Errc.OK, ""), sender.waitCompletion(WAIT));
      assertEquals(0, sender.inFlight());
      assertNull(listener.receive(Duration.ZERO));
      assertTrue(sender.status().contains("\"alpha\""));
    }
  }

  @Test
  void aStreamArrivesInOrderAndEveryMessageIsConfirmed() throws Exception {
    Mesh mesh = Mesh.pair();
    final int n = 5000;
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      CompletableFuture<List<String>> received = CompletableFuture.supplyAsync(() -> {
        List<String> got = new ArrayList<>();
        try {
          while (got.size() < n) {
            Message m = listener.receive(WAIT);
            if (m == null) break;
            got.add(m.text());
          }
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
        return got;
      });
      for (int i = 0; i < n; i++) assertEquals(i + 1, sender.send("beta", "inbox", "m" + i));
      int ok = 0;
      for (int i = 0; i < n; i++) {
        Completion c = sender.waitCompletion(WAIT);
        assertNotNull(c, ok + " completions, then none");
        assertTrue(c.ok(), c.toString());
        ok++;
      }
      List<String> got = received.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(n, got.size());
      for (int i = 0; i < n; i++) assertEquals("m" + i, got.get(i));
    }
  }

  @Test
  void futuresAndTheListenerCompleteOnTheIoThread() throws Exception {
    Mesh mesh = Mesh.pair();
    ConnectOptions io = new ConnectOptions().ioThread(true);
    try (Client listener = mesh.connect("beta", io); Client sender = mesh.connect("alpha", io)) {
      listener.register("inbox");
      CountDownLatch done = new CountDownLatch(1);
      CompletableFuture<Completion> f = sender.sendAsync("beta", "inbox", text("future"));
      f.thenRun(done::countDown);
      assertEquals("future", listener.receive(WAIT).text());
      // Nobody calls into the sender: its I/O thread completes the future.
      assertTrue(done.await(WAIT.toSeconds(), TimeUnit.SECONDS));
      assertTrue(f.get().ok());

      ConcurrentLinkedQueue<Completion> heard = new ConcurrentLinkedQueue<>();
      CountDownLatch three = new CountDownLatch(3);
      sender.setCompletionListener(c -> {
        heard.add(c);
        three.countDown();
      });
      long a = sender.send("beta", "inbox", "a");
      long b = sender.send("beta", "nobody", "b");
      long c = sender.send("gamma", "inbox", "c");
      assertEquals("a", listener.receive(WAIT).text());
      assertTrue(three.await(WAIT.toSeconds(), TimeUnit.SECONDS));
      assertTrue(heard.contains(new Completion(a, Errc.OK, "")));
      assertTrue(heard.stream().anyMatch(x -> x.msgId() == b && x.errc() == Errc.UNKNOWN_SERVICE));
      assertTrue(heard.stream().anyMatch(x -> x.msgId() == c && x.errc() == Errc.UNKNOWN_NODE));
      assertNull(sender.pollCompletion());
    }
  }

  @Test
  void aFutureDrivesAClientWithoutAnIoThread() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client listener = mesh.connect("beta", new ConnectOptions().ioThread(true));
         Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      CompletableFuture<String> received = CompletableFuture.supplyAsync(() -> {
        try {
          return listener.receive(WAIT).text();
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
      });
      CompletableFuture<Boolean> ok = sender.sendAsync("beta", "inbox", text("x"))
          .thenApply(Completion::ok);
      assertTrue(ok.get(WAIT.toSeconds(), TimeUnit.SECONDS)); // get() reads for it
      assertEquals("x", received.get(WAIT.toSeconds(), TimeUnit.SECONDS));
      assertEquals(Errc.UNKNOWN_SERVICE,
          sender.sendAndWait("beta", "nobody", text("y"), WAIT).errc());
    }
  }

  @Test
  void payloadsUpToTheMaximumArriveWhole() throws Exception {
    Mesh mesh = Mesh.builder("alpha", "beta").with("max_message_size: 4MiB").start();
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      listener.register("big");
      final int max = sender.maxMessageSize();
      assertEquals(4 << 20, max);
      ByteBuffer direct = ByteBuffer.allocateDirect(max);
      for (int i = 0; i < max; i++) direct.put(i, (byte) (i * 31 + 7));
      byte[] heap = new byte[300_000];
      for (int i = 0; i < heap.length; i++) heap[i] = (byte) (i * 13);
      // A slice of a heap buffer: only its remaining bytes go.
      ByteBuffer slice = ByteBuffer.wrap(heap, 1000, 200_000);
      sender.send("beta", "big", direct);
      sender.send("beta", "big", slice);
      sender.send("beta", "big", ByteBuffer.allocate(0));
      assertEquals(0, direct.position());
      assertEquals(1000, slice.position());
      CompletableFuture<List<Message>> got = CompletableFuture.supplyAsync(() -> {
        List<Message> ms = new ArrayList<>();
        try {
          for (int i = 0; i < 3; i++) ms.add(listener.receive(WAIT));
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
        return ms;
      });
      for (int i = 0; i < 3; i++) assertTrue(sender.waitCompletion(WAIT).ok());
      List<Message> ms = got.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(direct.duplicate().clear(), ms.get(0).payload());
      assertEquals(ByteBuffer.wrap(heap, 1000, 200_000), ms.get(1).payload());
      assertEquals(0, ms.get(2).payload().remaining());
    }
  }

  @Test
  void theSenderServiceIsNamedAndMessagesToThisNodeArriveToo() throws Exception {
    Mesh mesh = Mesh.pair();
    try (Client c = mesh.connect("alpha")) {
      c.register("first");
      c.register("second");
      c.send("alpha", "first", text("one"), "second");
      Message m = c.receive(WAIT);
      assertEquals(new Message("alpha", "second", "first", text("one")), m);
      assertTrue(c.waitCompletion(WAIT).ok());
      c.unregister("second");
      assertEquals(Errc.UNKNOWN_SERVICE,
          c.sendAndWait("alpha", "second", text("gone"), WAIT).errc());
    }
  }
}
