// A first rdmamsg program: receive on a service, send a message to it, and
// handle a failure. It talks to the rdmamsgd of its host ($RDMAMSG_SOCKET,
// else /run/rdmamsg/rdmamsgd.sock) and sends to its own node, so the message
// goes through the daemon and back; any NODE of the mesh works the same way.
//
//   c++ -std=c++20 first.cc $(pkg-config --cflags --libs rdmamsg) -o first && ./first
#include <rdmamsg/client.h>

#include <chrono>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

int main() {
  rdmamsg::Result<rdmamsg::Client> connected = rdmamsg::Client::connect();
  if (!connected) {
    std::fprintf(stderr, "connect: %s\n", connected.status().toString().c_str());
    return 1;
  }
  rdmamsg::Client& client = *connected;
  const std::string node = client.nodeName();  // the daemon's node in the mesh

  // Receive what is sent to NODE/inbox.
  if (rdmamsg::Status st = client.registerService("inbox"); !st.ok()) {
    std::fprintf(stderr, "register: %s\n", st.toString().c_str());
    return 1;
  }

  // Send: queued at once; its completion comes later.
  rdmamsg::Result<uint64_t> id = client.send(node, "inbox", "hello");
  if (!id) {
    std::fprintf(stderr, "send: %s\n", id.status().toString().c_str());
    return 1;
  }

  // Receive it.
  rdmamsg::Message m;
  if (rdmamsg::Status st = client.receive(m, 10s); !st.ok()) {
    std::fprintf(stderr, "receive: %s\n", st.toString().c_str());
    return 1;
  }
  std::printf("received \"%.*s\" from %s\n", static_cast<int>(m.text().size()), m.text().data(),
              m.srcNode.c_str());

  // Its completion: ok once the listening application (here: this one) took it.
  rdmamsg::Completion done;
  if (rdmamsg::Status st = client.waitCompletion(done, 10s); !st.ok() || !done.status.ok()) {
    std::fprintf(stderr, "hello was not confirmed: %s\n",
                 (st.ok() ? done.status : st).toString().c_str());
    return 1;
  }
  std::printf("message %llu confirmed\n", static_cast<unsigned long long>(*id));

  // A failure, handled: nobody listens on NODE/nobody. Every message gets
  // exactly one completion, ok or the reason it failed.
  id = client.send(node, "nobody", "is anyone there?");
  if (!id || !client.waitCompletion(done, 10s).ok()) {
    std::fprintf(stderr, "no completion for the message to nobody\n");
    return 1;
  }
  if (done.status.code() != rdmamsg::Errc::unknown_service) {
    std::fprintf(stderr, "unexpected: %s\n", done.status.toString().c_str());
    return 1;
  }
  std::printf("not delivered, as expected: %s\n", done.status.toString().c_str());
  return 0;
}
