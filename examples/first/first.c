/* A first rdmamsg program in C: receive on a service, send a message to it,
 * and handle a failure. It talks to the rdmamsgd of its host
 * ($RDMAMSG_SOCKET, else /run/rdmamsg/rdmamsgd.sock) and sends to its own
 * node, so the message goes through the daemon and back; any NODE of the
 * mesh works the same way.
 *
 *   cc first.c $(pkg-config --cflags --libs rdmamsg) -o first && ./first
 */
#include <rdmamsg/rdmamsg.h>
#include <stdio.h>

static int fail(rdmamsg_client* c, const char* what, rdmamsg_errc rc) {
  fprintf(stderr, "%s: %s: %s\n", what, rdmamsg_errc_name(rc), rdmamsg_last_error(c));
  rdmamsg_close(c);
  return 1;
}

int main(void) {
  rdmamsg_client* c = NULL;
  rdmamsg_errc rc = rdmamsg_connect(NULL, "first", 5000, &c);
  if (rc != RDMAMSG_OK) {
    fprintf(stderr, "connect: %s\n", rdmamsg_last_error(NULL));
    return 1;
  }
  const char* node = rdmamsg_node_name(c); /* the daemon's node in the mesh */

  /* Receive what is sent to NODE/inbox. */
  if ((rc = rdmamsg_register(c, "inbox", 5000)) != RDMAMSG_OK) return fail(c, "register", rc);

  /* Send: queued at once; its completion comes later. */
  uint64_t id;
  if ((rc = rdmamsg_send(c, node, "inbox", "hello", 5, &id)) != RDMAMSG_OK)
    return fail(c, "send", rc);

  /* Receive it. */
  rdmamsg_message m;
  if ((rc = rdmamsg_receive(c, &m, 10000)) != RDMAMSG_OK) return fail(c, "receive", rc);
  printf("received \"%.*s\" from %s\n", (int)m.size, (const char*)m.payload, m.src_node);

  /* Its completion: RDMAMSG_OK once the listening application (here: this
   * one) took it. */
  rdmamsg_completion done;
  if ((rc = rdmamsg_wait_completion(c, &done, 10000)) != RDMAMSG_OK)
    return fail(c, "completion", rc);
  if (done.code != RDMAMSG_OK) return fail(c, "hello was not confirmed", done.code);
  printf("message %llu confirmed\n", (unsigned long long)id);

  /* A failure, handled: nobody listens on NODE/nobody. Every message gets
   * exactly one completion, RDMAMSG_OK or the reason it failed. */
  if ((rc = rdmamsg_send(c, node, "nobody", "is anyone there?", 16, &id)) != RDMAMSG_OK)
    return fail(c, "send", rc);
  if ((rc = rdmamsg_wait_completion(c, &done, 10000)) != RDMAMSG_OK)
    return fail(c, "completion", rc);
  if (done.code != RDMAMSG_UNKNOWN_SERVICE) return fail(c, "unexpected", done.code);
  printf("not delivered, as expected: %s: %s\n", rdmamsg_errc_name(done.code), done.message);
  rdmamsg_close(c);
  return 0;
}
