// Sender: each line of standard input as one message to NODE/SERVICE, with a
// future per message; exits 0 once every message was taken by a listener.
//
//   java -cp /usr/share/java/rdmamsg.jar Sender.java beta/inbox [SOCKET] < lines.txt
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.rdmamsg.Client;
import org.rdmamsg.Completion;
import org.rdmamsg.ConnectOptions;
import org.rdmamsg.RdmamsgException;

public final class Sender {
  private Sender() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1 || !args[0].contains("/")) {
      System.err.println("usage: Sender NODE/SERVICE [SOCKET]");
      System.exit(2);
    }
    String node = args[0].substring(0, args[0].indexOf('/'));
    String service = args[0].substring(args[0].indexOf('/') + 1);
    String socket = args.length > 1 ? args[1] : null; // null: $RDMAMSG_SOCKET, else the default
    List<CompletableFuture<Completion>> sent = new ArrayList<>();
    try (Client client = Client.connect(socket, new ConnectOptions().clientName("sender"));
         BufferedReader in =
             new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null;) {
        ByteBuffer payload = ByteBuffer.wrap(line.getBytes(StandardCharsets.UTF_8));
        sent.add(client.sendAsync(node, service, payload)); // never waits for delivery
      }
      int failed = 0;
      for (CompletableFuture<Completion> f : sent) {
        Completion done = f.join(); // reads from the daemon while it waits
        if (!done.ok()) {
          System.err.println("sender: " + done);
          failed++;
        }
      }
      System.out.println("sender: " + (sent.size() - failed) + " of " + sent.size()
          + " messages taken by " + args[0]);
      System.exit(failed == 0 ? 0 : 1);
    } catch (RdmamsgException e) {
      System.err.println("sender: " + e.getMessage()); // e.g. "io_error: cannot connect ..."
      System.exit(1);
    }
  }
}
