package org.rdmamsg.tool;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.rdmamsg.Client;
import org.rdmamsg.ConnectOptions;
import org.rdmamsg.Message;
import org.rdmamsg.RdmamsgException;

/**
 * {@code listen SERVICE [--count N]}: registers SERVICE and writes each
 * message to standard output followed by a newline, in blocks while messages
 * stream in and flushed whenever none is waiting. A message counts as taken
 * (its sender's confirmation) only once it was written out and flushed. On
 * SIGINT or SIGTERM it prints what the daemon already handed over and exits 0.
 */
final class ListenCommand {
  private static volatile boolean stop;

  private ListenCommand() {}

  static int run(String socket, List<String> args) throws Main.UsageException {
    String service = null;
    long count = Long.MAX_VALUE;
    for (int i = 0; i < args.size(); i++) {
      String a = args.get(i);
      if (a.equals("--count") || a.equals("-n")) {
        count = Main.positive(args, i++, a);
      } else if (a.startsWith("-") && a.length() > 1) {
        throw new Main.UsageException("listen: unknown option " + a);
      } else if (service == null) {
        service = a;
      } else {
        throw new Main.UsageException("listen: unexpected argument " + a);
      }
    }
    if (service == null) throw new Main.UsageException("listen: SERVICE is required");

    // A signal stops the loop; the JVM waits for it to finish before it exits, with 0.
    CountDownLatch done = new CountDownLatch(1);
    int[] exit = {Main.OK};
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      if (done.getCount() == 0) return; // a normal exit
      stop = true;
      try {
        done.await(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      Runtime.getRuntime().halt(exit[0]);
    }));
    try {
      exit[0] = listen(socket, service, count);
      return exit[0];
    } finally {
      done.countDown();
    }
  }

  private static int listen(String socket, String service, long count) {
    Client client;
    try {
      client = Client.connect(socket, new ConnectOptions().clientName("rdmamsg-java-listen"));
      client.setConfirmOnReceive(false); // taken once written out and flushed
    } catch (RdmamsgException e) {
      return Main.report("listen", e);
    }
    try (client) {
      try {
        client.register(service);
      } catch (RdmamsgException e) {
        return Main.report("register " + service, e);
      }
      OutputStream out =
          new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 256 << 10);
      try {
        long received = 0;
        while (received < count && !stop) {
          Message m = client.tryReceive();
          if (m == null) {
            out.flush(); // then the messages written count as taken
            client.confirmReceived();
            m = client.receive(Duration.ofMillis(200));
            if (m == null) continue;
          }
          write(out, m.payload());
          ++received;
        }
        // Stopped by a signal: what the daemon already handed over is printed too.
        for (Message m; received < count && (m = client.tryReceive()) != null; ++received) {
          write(out, m.payload());
        }
        out.flush();
        client.confirmReceived();
        return Main.OK;
      } catch (RdmamsgException e) {
        flushQuietly(out);
        return Main.report("listen " + service, e);
      } catch (IOException e) {
        System.err.println("rdmamsg: listen " + service + ": writing standard output: "
            + e.getMessage());
        return Main.FAILURE;
      }
    }
  }

  private static void write(OutputStream out, ByteBuffer payload) throws IOException {
    if (payload.hasArray()) {
      out.write(payload.array(), payload.arrayOffset() + payload.position(), payload.remaining());
    } else {
      byte[] b = new byte[payload.remaining()];
      payload.duplicate().get(b);
      out.write(b);
    }
    out.write('\n');
  }

  private static void flushQuietly(OutputStream out) {
    try {
      out.flush();
    } catch (IOException e) {
      // the failure being reported comes first
    }
  }
}
