// Listener: registers SERVICE and prints each message with its sender, until
// COUNT messages came (or for ever).
//
//   java -cp /usr/share/java/rdmamsg.jar Listener.java inbox [COUNT] [SOCKET]
import java.time.Duration;
import org.rdmamsg.Client;
import org.rdmamsg.Message;
import org.rdmamsg.RdmamsgException;

public final class Listener {
  private Listener() {}

  public static void main(String[] args) {
    if (args.length < 1) {
      System.err.println("usage: Listener SERVICE [COUNT] [SOCKET]");
      System.exit(2);
    }
    long count = args.length > 1 ? Long.parseLong(args[1]) : Long.MAX_VALUE;
    String socket = args.length > 2 ? args[2] : null;
    try (Client client = Client.connect(socket)) {
      client.register(args[0]);
      System.err.println("listener: " + args[0] + " on " + client.nodeName());
      for (long n = 0; n < count;) {
        Message m = client.receive(Duration.ofSeconds(1)); // null if none came
        if (m == null) continue;
        // Returned by receive: the message counts as taken, its sender's completion is ok.
        System.out.println(m.srcNode() + "/" + m.srcService() + ": " + m.text());
        n++;
      }
    } catch (RdmamsgException e) {
      System.err.println("listener: " + e.getMessage()); // e.g. "duplicate_service: ..."
      System.exit(1);
    }
  }
}
