"""A first rdmamsg program in Python: receive on a service, send a message
to it, and handle a failure. It talks to the rdmamsgd of its host
($RDMAMSG_SOCKET, else /run/rdmamsg/rdmamsgd.sock) and sends to its own
node, so the message goes through the daemon and back; any NODE of the
mesh works the same way.

    python3 first.py
"""
import sys

import rdmamsg

with rdmamsg.Client(name="first") as client:  # raises rdmamsg.RdmamsgError if it cannot
    node = client.node  # the daemon's node in the mesh

    # Receive what is sent to NODE/inbox.
    client.register("inbox")

    # Send: queued at once; its completion comes later.
    msg_id = client.send(node, "inbox", "hello")

    # Receive it.
    m = client.receive(timeout=10)
    if m is None:
        sys.exit("nothing received")
    print(f'received "{m.payload.decode()}" from {m.src_node}')

    # Its completion: ok once the listening application (here: this one) took it.
    done = client.wait_completion(timeout=10)
    if done is None or not done.ok:
        sys.exit(f"hello was not confirmed: {done}")
    print(f"message {msg_id} confirmed")

    # A failure, handled: nobody listens on NODE/nobody. Every message gets
    # exactly one completion, ok or the reason it failed.
    client.send(node, "nobody", "is anyone there?")
    done = client.wait_completion(timeout=10)
    if done is None or done.name != "unknown_service":
        sys.exit(f"unexpected: {done}")
    print(f"not delivered, as expected: {done.name}: {done.message}")
