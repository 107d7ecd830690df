// A first rdmamsg program in Java: receive on a service, send a message to
// it, and handle a failure. It talks to the rdmamsgd of its host
// ($RDMAMSG_SOCKET, else /run/rdmamsg/rdmamsgd.sock) and sends to its own
// node, so the message goes through the daemon and back; any NODE of the
// mesh works the same way.
//
//   java -cp /usr/share/java/rdmamsg.jar First.java
import java.time.Duration;
import org.rdmamsg.Client;
import org.rdmamsg.Completion;
import org.rdmamsg.Errc;
import org.rdmamsg.Message;
import org.rdmamsg.RdmamsgException;

public final class First {
  private First() {}

  public static void main(String[] args) {
    try (Client client = Client.connect()) {
      String node = client.nodeName(); // the daemon's node in the mesh

      // Receive what is sent to NODE/inbox.
      client.register("inbox");

      // Send: queued at once; its completion comes later.
      long id = client.send(node, "inbox", "hello");

      // Receive it.
      Message m = client.receive(Duration.ofSeconds(10)); // null if none came in time
      if (m == null) {
        throw new IllegalStateException("nothing received");
      }
      System.out.println("received \"" + m.text() + "\" from " + m.srcNode());

      // Its completion: ok once the listening application (here: this one) took it.
      Completion done = client.waitCompletion(Duration.ofSeconds(10)); // null if none came
      if (done == null || !done.ok()) {
        throw new IllegalStateException("hello was not confirmed: " + done);
      }
      System.out.println("message " + id + " confirmed");

      // A failure, handled: nobody listens on NODE/nobody. Every message gets
      // exactly one completion, ok or the reason it failed.
      client.send(node, "nobody", "is anyone there?");
      done = client.waitCompletion(Duration.ofSeconds(10));
      if (done == null || done.errc() != Errc.UNKNOWN_SERVICE) {
        throw new IllegalStateException("unexpected: " + done);
      }
      System.out.println("not delivered, as expected: " + done.errc() + ": " + done.message());
    } catch (RdmamsgException e) {
      System.err.println(e.getMessage()); // e.g. "not_connected: ..." when no daemon runs
      System.exit(1);
    }
  }
}
