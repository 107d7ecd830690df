package org.rdmamsg;

/**
 * A client's parts wired as {@link Client} wires them, over a socket to a
 * {@link FakeDaemon}, without the handshake: for the tests of the parts that
 * read, write and wait. The test plays the daemon.
 */
final class ClientParts implements AutoCloseable {
  final FakeDaemon daemon = new FakeDaemon();
  final Handshake handshake = new Handshake();
  final Completions completions = new Completions();
  final ReceiveQueue inbox = new ReceiveQueue();
  final Holds holds = new Holds();
  final Requests registers = new Requests();
  final Requests statuses = new Requests();
  final Subscriptions subscriptions = new Subscriptions();
  final SocketTransport transport;
  final IoEngine engine;
  final Sender sender;
  final Receiver receiver;
  final Subjects subjects;

  ClientParts() throws java.io.IOException {
    Inbound inbound =
        new Inbound(handshake, inbox, completions, holds, registers, statuses, subscriptions);
    transport = SocketTransport.connect(daemon.socket.toString(), Deadline.after(FakeDaemon.WAIT),
        inbound, handshake::maxBody);
    daemon.accept();
    engine = new IoEngine(transport, inbox, completions);
    sender = new Sender(engine, transport, handshake, holds, completions);
    receiver = new Receiver(engine, inbox);
    subjects = new Subjects(engine, transport, handshake, sender, receiver, inbox, completions,
        subscriptions);
  }

  /** A call of the parts, under the client's lock as {@link Client} makes it. */
  interface Call<T> {
    T run() throws RdmamsgException;
  }

  <T> T locked(Call<T> call) throws RdmamsgException {
    engine.lock();
    try {
      return call.run();
    } finally {
      engine.unlock();
    }
  }

  /** Ends the connection with {@code why}, as a failure of a part would. */
  void lose(RdmamsgException why) {
    engine.lock();
    try {
      engine.lose(why);
    } finally {
      engine.unlock();
    }
  }

  @Override
  public void close() throws java.io.IOException {
    lose(new RdmamsgException(Errc.NOT_CONNECTED, "test over"));
    daemon.close();
  }
}
