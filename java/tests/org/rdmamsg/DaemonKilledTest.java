package org.rdmamsg;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A daemon killed (SIGKILL) in the middle of a stream: every message sent is
 * answered, a message confirmed was taken by the listener, and nothing hangs.
 */
@Timeout(120)
@ExtendWith(MeshExtension.class)
class DaemonKilledTest {
  static final Duration WAIT = Duration.ofSeconds(30);
  static final int N = 20000;

  private static ByteBuffer text(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void theReceivingDaemonKilledMidStreamEverySendIsAnswered() throws Exception {
    Mesh mesh = Mesh.pair();
    Set<String> taken = ConcurrentHashMap.newKeySet();
    try (Client listener = mesh.connect("beta"); Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      CompletableFuture<Void> receiving = CompletableFuture.runAsync(() -> {
        try {
          for (Message m; (m = listener.receive(WAIT)) != null;) taken.add(m.text());
        } catch (RdmamsgException e) {
          // beta is gone
        }
      });
      Map<Long, Completion> answers = new HashMap<>();
      for (int i = 1; i <= N; i++) {
        assertEquals(i, sender.send("beta", "inbox", text(Integer.toString(i))));
        if (i == N / 4) {
          // Some are through: kill beta while the rest stream.
          for (Completion c; answers.size() < 100 && (c = sender.waitCompletion(WAIT)) != null;) {
            answers.put(c.msgId(), c);
          }
          mesh.kill9("beta");
        }
      }
      while (answers.size() < N) {
        Completion c = sender.waitCompletion(WAIT);
        assertNotNull(c, "no answer for " + (N - answers.size()) + " messages");
        assertEquals(null, answers.put(c.msgId(), c), "answered twice: " + c);
      }
      receiving.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      int ok = 0;
      for (Completion c : answers.values()) {
        if (c.ok()) {
          ok++;
          assertTrue(taken.contains(Long.toString(c.msgId())),
              "message " + c.msgId() + " confirmed but never taken");
        } else {
          assertEquals(Errc.PEER_UNREACHABLE, c.errc(), c.toString());
          assertTrue(c.message().contains("beta"), c.toString());
        }
      }
      assertTrue(ok >= 100, ok + " confirmed");
      assertTrue(ok < N, "every message confirmed although beta was killed");
    }
  }

  @Test
  void theLocalDaemonKilledEveryCallFailsAndEveryFutureCompletes() throws Exception {
    Mesh mesh = Mesh.pair();
    Client listener = mesh.connect("beta", new ConnectOptions().ioThread(true));
    try (Client sender = mesh.connect("alpha")) {
      listener.register("inbox");
      CompletableFuture<Void> receiving = CompletableFuture.runAsync(() -> {
        try {
          while (listener.receive(WAIT) != null) {
            // taking everything
          }
        } catch (RdmamsgException e) {
          throw new RuntimeException(e);
        }
      });
      List<CompletableFuture<Completion>> futures = new ArrayList<>();
      RdmamsgException lost = null;
      for (int i = 1; i <= N && lost == null; i++) {
        try {
          futures.add(sender.sendAsync("beta", "inbox", text(Integer.toString(i))));
        } catch (RdmamsgException e) {
          lost = e;
        }
        if (i == N / 4) {
          futures.get(0).get(WAIT.toSeconds(), TimeUnit.SECONDS); // the stream flows
          mesh.kill9("alpha");
        }
      }
      if (lost == null) {
        lost = assertThrows(RdmamsgException.class, () -> sender.flush(WAIT));
      }
      assertTrue(lost.errc() == Errc.NOT_CONNECTED || lost.errc() == Errc.IO_ERROR,
          lost.toString());
      int ok = 0;
      int unknown = 0;
      for (CompletableFuture<Completion> f : futures) {
        try {
          Completion c = f.get(WAIT.toSeconds(), TimeUnit.SECONDS);
          assertTrue(c.ok(), c.toString());
          ok++;
        } catch (ExecutionException e) {
          assertEquals(lost, e.getCause());
          unknown++;
        }
      }
      assertEquals(futures.size(), ok + unknown);
      assertTrue(ok >= 1 && unknown >= 1, ok + " confirmed, " + unknown + " unknown");
      assertEquals(lost, assertThrows(RdmamsgException.class, () -> sender.receive(WAIT)));
      listener.close();
      receiving.handle((v, e) -> null).get(WAIT.toSeconds(), TimeUnit.SECONDS);
    } finally {
      listener.close();
    }
  }
}
