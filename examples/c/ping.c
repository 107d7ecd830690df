/* ping: the C API end to end. Registers "ping" on the local daemon, sends
 * itself three messages through it, receives them, and checks that each
 * completion came back and that a message to a service nobody registered
 * fails with RDMAMSG_UNKNOWN_SERVICE.
 *
 *   cc ping.c $(pkg-config --cflags --libs rdmamsg) -o ping && ./ping [SOCKET]
 */
#include <rdmamsg/rdmamsg.h>
#include <stdio.h>
#include <string.h>

static int fail(rdmamsg_client* c, const char* what, rdmamsg_errc rc) {
  fprintf(stderr, "ping: %s: %s (%s)\n", what, rdmamsg_errc_name(rc), rdmamsg_last_error(c));
  rdmamsg_close(c);
  return 1;
}

int main(int argc, char** argv) {
  rdmamsg_client* c = NULL;
  rdmamsg_errc rc = rdmamsg_connect(argc > 1 ? argv[1] : NULL, "ping", 5000, &c);
  if (rc != RDMAMSG_OK) {
    fprintf(stderr, "ping: %s\n", rdmamsg_last_error(NULL));
    return 1;
  }
  const char* node = rdmamsg_node_name(c);
  if ((rc = rdmamsg_register(c, "ping", 5000)) != RDMAMSG_OK) return fail(c, "register", rc);

  const char* texts[3] = {"one", "two", "three"};
  uint64_t ids[3];
  for (int i = 0; i < 3; i++)
    if ((rc = rdmamsg_send(c, node, "ping", texts[i], strlen(texts[i]), &ids[i])) != RDMAMSG_OK)
      return fail(c, "send", rc);
  /* A message is confirmed once the listener (here: this client) has taken it. */
  for (int i = 0; i < 3; i++) {
    rdmamsg_message m;
    if ((rc = rdmamsg_receive(c, &m, 10000)) != RDMAMSG_OK) return fail(c, "receive", rc);
    if (m.size != strlen(texts[i]) || memcmp(m.payload, texts[i], m.size) != 0 ||
        strcmp(m.src_node, node) != 0 || strcmp(m.service, "ping") != 0) {
      fprintf(stderr, "ping: message %d is not what was sent\n", i + 1);
      rdmamsg_close(c);
      return 1;
    }
  }
  for (int i = 0; i < 3; i++) {
    rdmamsg_completion done;
    if ((rc = rdmamsg_wait_completion(c, &done, 10000)) != RDMAMSG_OK)
      return fail(c, "completion", rc);
    if (done.msg_id != ids[i] || done.code != RDMAMSG_OK) {
      fprintf(stderr, "ping: message %llu: %s %s\n", (unsigned long long)done.msg_id,
              rdmamsg_errc_name(done.code), done.message);
      rdmamsg_close(c);
      return 1;
    }
  }
  uint64_t id;
  rdmamsg_completion done;
  if ((rc = rdmamsg_try_send(c, node, "nobody", "x", 1, &id)) != RDMAMSG_OK)
    return fail(c, "try_send", rc);
  if ((rc = rdmamsg_wait_completion(c, &done, 10000)) != RDMAMSG_OK)
    return fail(c, "completion", rc);
  if (done.code != RDMAMSG_UNKNOWN_SERVICE) {
    fprintf(stderr, "ping: a message to nobody ended %s\n", rdmamsg_errc_name(done.code));
    rdmamsg_close(c);
    return 1;
  }
  printf("ping: 3 messages through rdmamsgd on %s, and %s for a service nobody has\n", node,
         rdmamsg_errc_name(done.code));
  rdmamsg_close(c);
  return 0;
}
