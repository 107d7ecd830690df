/* The conformance driver for the C API (rdmamsg/rdmamsg.h): reads commands
 * on stdin, one per line, and answers each on stdout as
 * tests/conformance/README.md describes. Plain C11 with POSIX getline. */
#define _POSIX_C_SOURCE 200809L

#include <rdmamsg/rdmamsg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CLIENTS 16
#define MAX_ARGS 8
#define MAX_PUBLISHED 1024
#define FILL_MS 20000
#define FLUSH_MS 10000

struct named {
  char name[64];
  rdmamsg_client* c;
  /* The ids it published whose completion has not come (they print as
   * pubdone), and the reply token of the last request it received (what
   * `reply` answers). */
  uint64_t published[MAX_PUBLISHED];
  int npublished;
  char last_request[256];
};
static struct named clients[MAX_CLIENTS];

/* A growable output line, written out by flush_line(). */
static char* out;
static size_t out_len, out_cap;

static void put(const char* s, size_t n) {
  if (out_len + n + 1 > out_cap) {
    out_cap = (out_len + n + 1) * 2;
    out = realloc(out, out_cap);
    if (out == NULL) abort();
  }
  memcpy(out + out_len, s, n);
  out_len += n;
}
static void puts_(const char* s) {
  put(s, strlen(s));
}
static void putu(unsigned long long v) {
  char b[32];
  snprintf(b, sizeof b, "%llu", v);
  puts_(b);
}
/* Text on one line: CR and LF become spaces. */
static void put_text(const char* s) {
  for (; *s != '\0'; ++s)
    put(*s == '\n' || *s == '\r' ? " " : s, 1);
}
/* "~" for the empty string. */
static void put_field(const char* s) {
  puts_(s[0] == '\0' ? "~" : s);
}
static void put_hex(const void* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char* b = p;
  size_t i;
  if (n == 0) {
    puts_("~");
    return;
  }
  for (i = 0; i < n; ++i) {
    put(&digits[b[i] >> 4], 1);
    put(&digits[b[i] & 15], 1);
  }
}
static void flush_line(void) {
  put("\n", 1);
  fwrite(out, 1, out_len, stdout);
  fflush(stdout);
  out_len = 0;
}
static void say(const char* s) {
  puts_(s);
  flush_line();
}

static const char* arg(const char* s) {
  return strcmp(s, "~") == 0 ? "" : s;
}

/* Decodes hex ("~": empty) into a new buffer; *n its size. */
static unsigned char* from_hex(const char* hex, size_t* n) {
  size_t len = strcmp(hex, "~") == 0 ? 0 : strlen(hex) / 2, i;
  unsigned char* b = malloc(len + 1);
  if (b == NULL) abort();
  for (i = 0; i < len; ++i) {
    char two[3] = {hex[2 * i], hex[2 * i + 1], '\0'};
    b[i] = (unsigned char)strtoul(two, NULL, 16);
  }
  *n = len;
  return b;
}

/* "REASON TEXT" of the last failure on c (the text is rdmamsg_last_error). */
static void put_reason(rdmamsg_client* c, rdmamsg_errc rc) {
  puts_(rdmamsg_errc_name(rc));
  puts_(" ");
  put_text(rdmamsg_last_error(c));
}
static void say_error(rdmamsg_client* c, rdmamsg_errc rc) {
  puts_("error ");
  put_reason(c, rc);
  flush_line();
}
static void say_ok_or(rdmamsg_client* c, rdmamsg_errc rc) {
  if (rc == RDMAMSG_OK)
    say("ok");
  else
    say_error(c, rc);
}
static void say_msg(struct named* slot, const rdmamsg_message* m) {
  if (m->reply_to[0] != '\0')
    snprintf(slot->last_request, sizeof slot->last_request, "%s", m->reply_to);
  if (m->subscription != 0) {
    puts_("submsg ");
    putu(m->subscription);
    puts_(" ");
    put_field(m->src_node);
    puts_(" ");
    put_field(m->subject);
    puts_(" ");
    put_field(m->reply_to);
    puts_(" ");
    put_hex(m->payload, m->size);
    flush_line();
    return;
  }
  puts_("msg ");
  put_field(m->src_node);
  puts_(" ");
  put_field(m->src_service);
  puts_(" ");
  put_field(m->service);
  puts_(" ");
  put_hex(m->payload, m->size);
  flush_line();
}
/* Whether `id` is one of slot's publishes, forgotten now. */
static int was_published(struct named* slot, uint64_t id) {
  int i;
  for (i = 0; i < slot->npublished; ++i) {
    if (slot->published[i] == id) {
      slot->published[i] = slot->published[--slot->npublished];
      return 1;
    }
  }
  return 0;
}
static void say_done(struct named* slot, const rdmamsg_completion* d) {
  int pub = was_published(slot, d->msg_id);
  puts_(pub ? "pubdone " : "done ");
  putu(d->msg_id);
  puts_(" ");
  puts_(rdmamsg_errc_name(d->code));
  if (pub) {
    puts_(" ");
    putu(d->matched);
    puts_(" ");
    putu(d->taken);
    puts_(" ");
    putu(d->dropped);
  }
  if (d->message != NULL && d->message[0] != '\0') {
    puts_(" ");
    put_text(d->message);
  }
  flush_line();
}

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A list of ids, "1,2,3" ("~" when empty), built in its own buffer. */
struct ids {
  char* s;
  size_t len, cap;
  unsigned long count;
};
static void ids_add(struct ids* l, uint64_t id) {
  char b[32];
  int n = snprintf(b, sizeof b, "%s%llu", l->count ? "," : "", (unsigned long long)id);
  if (l->len + (size_t)n + 1 > l->cap) {
    l->cap = (l->len + (size_t)n + 1) * 2;
    l->s = realloc(l->s, l->cap);
    if (l->s == NULL) abort();
  }
  memcpy(l->s + l->len, b, (size_t)n + 1);
  l->len += (size_t)n;
  l->count++;
}
static void put_ids(const struct ids* l) {
  putu(l->count);
  puts_(" ");
  puts_(l->count ? l->s : "~");
}

static struct named* find(const char* name) {
  int i;
  for (i = 0; i < MAX_CLIENTS; ++i)
    if (clients[i].c != NULL && strcmp(clients[i].name, name) == 0) return &clients[i];
  return NULL;
}

static void do_connect(const char* name, const char* path) {
  struct named* slot = find(name);
  char client_name[80];
  rdmamsg_client* c;
  rdmamsg_errc rc;
  int i;
  for (i = 0; slot == NULL && i < MAX_CLIENTS; ++i)
    if (clients[i].c == NULL) slot = &clients[i];
  if (slot == NULL) {
    say("error driver too many clients");
    return;
  }
  snprintf(client_name, sizeof client_name, "conformance-%s", name);
  rc = rdmamsg_connect(path, client_name, 5000, &c);
  if (rc != RDMAMSG_OK) {
    say_error(NULL, rc);
    return;
  }
  if (slot->c != NULL) rdmamsg_close(slot->c);
  snprintf(slot->name, sizeof slot->name, "%s", name);
  slot->c = c;
  slot->npublished = 0;
  slot->last_request[0] = '\0';
  puts_("ok ");
  puts_(rdmamsg_node_name(c));
  puts_(" ");
  putu(rdmamsg_max_message_size(c));
  flush_line();
}

static void do_send(rdmamsg_client* c, char** a, int try_) {
  size_t n;
  unsigned char* p = from_hex(a[2], &n);
  uint64_t id = 0;
  rdmamsg_errc rc = try_ ? rdmamsg_try_send(c, arg(a[0]), arg(a[1]), p, n, &id)
                         : rdmamsg_send(c, arg(a[0]), arg(a[1]), p, n, &id);
  free(p);
  if (rc == RDMAMSG_WOULD_BLOCK && try_) {
    say("would_block");
  } else if (rc != RDMAMSG_OK) {
    say_error(c, rc);
  } else {
    puts_("id ");
    putu(id);
    flush_line();
  }
}

static void do_sendn(rdmamsg_client* c, char** a) {
  long count = strtol(a[2], NULL, 10), i;
  struct ids sent = {NULL, 0, 0, 0};
  rdmamsg_errc rc = RDMAMSG_OK;
  char payload[128];
  for (i = 0; i < count; ++i) {
    uint64_t id;
    int len = snprintf(payload, sizeof payload, "%s%ld", arg(a[3]), i);
    rc = rdmamsg_send(c, arg(a[0]), arg(a[1]), payload, (size_t)len, &id);
    if (rc != RDMAMSG_OK) break;
    ids_add(&sent, id);
  }
  puts_("sent ");
  put_ids(&sent);
  if (rc != RDMAMSG_OK) {
    puts_(" ");
    put_reason(c, rc);
  }
  flush_line();
  free(sent.s);
}

static void do_fill(rdmamsg_client* c, char** a) {
  size_t n;
  unsigned char* p = from_hex(a[2], &n);
  long max = strtol(a[3], NULL, 10);
  long long deadline = now_ms() + FILL_MS;
  struct ids accepted = {NULL, 0, 0, 0};
  const char* outcome = "unblocked ";
  rdmamsg_errc rc = RDMAMSG_OK;
  while ((long)accepted.count < max && now_ms() < deadline) {
    uint64_t id;
    rc = rdmamsg_try_send(c, arg(a[0]), arg(a[1]), p, n, &id);
    if (rc == RDMAMSG_WOULD_BLOCK) {
      outcome = "blocked ";
      rc = RDMAMSG_OK;
      break;
    }
    if (rc != RDMAMSG_OK) break;
    ids_add(&accepted, id);
    rc = rdmamsg_process_io(c);
    if (rc != RDMAMSG_OK) break;
  }
  free(p);
  if (rc != RDMAMSG_OK) {
    say_error(c, rc);
  } else {
    puts_(outcome);
    put_ids(&accepted);
    flush_line();
  }
  free(accepted.s);
}

/* RDMAMSG_DRIVER_VIEWS=1: messages are received as views
 * (rdmamsg_receive_view), each released once it was printed. */
static int use_views;

/* Receives one message and prints it. */
static rdmamsg_errc receive_and_say(struct named* slot, int timeout_ms) {
  rdmamsg_client* c = slot->c;
  rdmamsg_message m;
  rdmamsg_errc rc =
      use_views ? rdmamsg_receive_view(c, &m, timeout_ms) : rdmamsg_receive(c, &m, timeout_ms);
  if (rc != RDMAMSG_OK) return rc;
  say_msg(slot, &m);
  return use_views ? rdmamsg_release_view(c) : RDMAMSG_OK;
}

static void do_take(struct named* slot, char** a) {
  rdmamsg_client* c = slot->c;
  long max = strtol(a[0], NULL, 10), n = 0;
  int idle = (int)strtol(a[1], NULL, 10);
  rdmamsg_errc rc = RDMAMSG_OK;
  while (n < max) {
    rc = receive_and_say(slot, idle);
    if (rc != RDMAMSG_OK) break;
    ++n;
  }
  puts_("end ");
  putu((unsigned long long)n);
  if (rc != RDMAMSG_OK && rc != RDMAMSG_TIMEOUT) {
    puts_(" ");
    put_reason(c, rc);
  }
  flush_line();
}

static void do_completions(struct named* slot, char** a) {
  rdmamsg_client* c = slot->c;
  long max = strtol(a[0], NULL, 10), n = 0;
  long long deadline = now_ms() + strtol(a[1], NULL, 10);
  rdmamsg_completion d;
  rdmamsg_errc rc = RDMAMSG_OK;
  while (n < max) {
    long long left = deadline - now_ms();
    if (left <= 0) break;
    rc = rdmamsg_wait_completion(c, &d, (int)left);
    if (rc != RDMAMSG_OK) break;
    say_done(slot, &d);
    ++n;
  }
  puts_("end ");
  putu((unsigned long long)n);
  if (rc != RDMAMSG_OK && rc != RDMAMSG_TIMEOUT) {
    puts_(" ");
    put_reason(c, rc);
  }
  flush_line();
}

static void say_id_or(rdmamsg_client* c, rdmamsg_errc rc, uint64_t id) {
  if (rc != RDMAMSG_OK) {
    say_error(c, rc);
    return;
  }
  puts_("id ");
  putu(id);
  flush_line();
}

static void do_sub(rdmamsg_client* c, char** a) {
  uint64_t id = 0;
  int policy = strcmp(a[2], "block") == 0 ? RDMAMSG_SLOW_BLOCK : RDMAMSG_SLOW_DROP;
  rdmamsg_errc rc;
  if (strcmp(a[2], "block") != 0 && strcmp(a[2], "drop") != 0) {
    say("error driver policy");
    return;
  }
  rc = rdmamsg_subscribe(c, arg(a[0]), arg(a[1]), policy, (uint32_t)strtoul(a[3], NULL, 10), 5000,
                         &id);
  if (rc != RDMAMSG_OK) {
    say_error(c, rc);
    return;
  }
  puts_("sub ");
  putu(id);
  flush_line();
}

static void do_pub(struct named* slot, char** a) {
  size_t n;
  unsigned char* p = from_hex(a[1], &n);
  uint64_t id = 0;
  rdmamsg_errc rc = rdmamsg_publish(slot->c, arg(a[0]), p, n, &id);
  free(p);
  if (rc == RDMAMSG_OK) {
    if (slot->npublished == MAX_PUBLISHED) {
      say("error driver too many publishes in flight");
      return;
    }
    slot->published[slot->npublished++] = id;
  }
  say_id_or(slot->c, rc, id);
}

static void do_request(rdmamsg_client* c, char** a) {
  size_t n;
  unsigned char* p = from_hex(a[1], &n);
  rdmamsg_message r;
  rdmamsg_errc rc = rdmamsg_request_wait(c, arg(a[0]), p, n, &r, (int)strtol(a[2], NULL, 10));
  free(p);
  if (rc != RDMAMSG_OK) {
    say_error(c, rc);
    return;
  }
  puts_("reply ");
  put_field(r.src_node);
  puts_(" ");
  put_hex(r.payload, r.size);
  flush_line();
}

static void do_reply(struct named* slot, char** a) {
  size_t n;
  unsigned char* p;
  uint64_t id = 0;
  rdmamsg_errc rc;
  if (slot->last_request[0] == '\0') {
    say("error driver no message received to reply to");
    return;
  }
  p = from_hex(a[0], &n);
  rc = rdmamsg_reply(slot->c, slot->last_request, p, n, &id);
  free(p);
  say_id_or(slot->c, rc, id);
}

static void run(char* name, char* verb, char** a, int argc) {
  struct named* slot;
  rdmamsg_client* c;
  rdmamsg_errc rc;
  (void)argc;
  if (strcmp(verb, "connect") == 0) {
    do_connect(name, a[0]);
    return;
  }
  slot = find(name);
  if (slot == NULL) {
    say("error driver no such client");
    return;
  }
  c = slot->c;
  if (strcmp(verb, "register") == 0) {
    say_ok_or(c, rdmamsg_register(c, arg(a[0]), 5000));
  } else if (strcmp(verb, "unregister") == 0) {
    say_ok_or(c, rdmamsg_unregister(c, arg(a[0])));
  } else if (strcmp(verb, "send") == 0 || strcmp(verb, "trysend") == 0) {
    do_send(c, a, strcmp(verb, "trysend") == 0);
  } else if (strcmp(verb, "sendn") == 0) {
    do_sendn(c, a);
  } else if (strcmp(verb, "fill") == 0) {
    do_fill(c, a);
  } else if (strcmp(verb, "flush") == 0) {
    say_ok_or(c, rdmamsg_flush(c, FLUSH_MS));
  } else if (strcmp(verb, "recv") == 0) {
    rc = receive_and_say(slot, (int)strtol(a[0], NULL, 10));
    if (rc == RDMAMSG_OK)
      ; /* said */
    else if (rc == RDMAMSG_TIMEOUT)
      say("timeout");
    else
      say_error(c, rc);
  } else if (strcmp(verb, "take") == 0) {
    do_take(slot, a);
  } else if (strcmp(verb, "completion") == 0) {
    rdmamsg_completion d;
    rc = rdmamsg_wait_completion(c, &d, (int)strtol(a[0], NULL, 10));
    if (rc == RDMAMSG_OK)
      say_done(slot, &d);
    else if (rc == RDMAMSG_TIMEOUT)
      say("timeout");
    else
      say_error(c, rc);
  } else if (strcmp(verb, "completions") == 0) {
    do_completions(slot, a);
  } else if (strcmp(verb, "sub") == 0) {
    do_sub(c, a);
  } else if (strcmp(verb, "unsub") == 0) {
    say_ok_or(c, rdmamsg_unsubscribe(c, strtoull(a[0], NULL, 10)));
  } else if (strcmp(verb, "pub") == 0) {
    do_pub(slot, a);
  } else if (strcmp(verb, "request") == 0) {
    do_request(c, a);
  } else if (strcmp(verb, "reply") == 0) {
    do_reply(slot, a);
  } else if (strcmp(verb, "inflight") == 0) {
    puts_("inflight ");
    putu(rdmamsg_in_flight(c));
    flush_line();
  } else if (strcmp(verb, "io") == 0) {
    say_ok_or(c, rdmamsg_process_io(c));
  } else if (strcmp(verb, "close") == 0) {
    rdmamsg_close(c);
    slot->c = NULL;
    say("ok");
  } else {
    say("error driver unknown command");
  }
}

int main(void) {
  char* text = NULL;
  size_t cap = 0;
  int i;
  const char* views = getenv("RDMAMSG_DRIVER_VIEWS");
  use_views = views != NULL && strcmp(views, "1") == 0;
  while (getline(&text, &cap, stdin) > 0) {
    char* words[MAX_ARGS + 2];
    static char empty[] = "~";
    int n = 0;
    char* save = NULL;
    char* w = strtok_r(text, " \n", &save);
    while (w != NULL && n < MAX_ARGS + 2) {
      words[n++] = w;
      w = strtok_r(NULL, " \n", &save);
    }
    if (n < 2) continue;
    for (i = n; i < MAX_ARGS + 2; ++i)
      words[i] = empty; /* missing arguments read as "" */
    run(words[0], words[1], words + 2, n - 2);
  }
  free(text);
  for (i = 0; i < MAX_CLIENTS; ++i)
    rdmamsg_close(clients[i].c); /* each says goodbye */
  free(out);
  return 0;
}
