/* rdmamsg.h: the C API of librdmamsg, for applications in C and for
 * bindings (Python's rdmamsg package uses it through ctypes; Go, Rust and
 * others can do the same). It wraps the C++ rdmamsg::Client one to one.
 *
 *   rdmamsg_client *c;
 *   if (rdmamsg_connect(NULL, "myapp", 5000, &c) != RDMAMSG_OK) {
 *     fprintf(stderr, "%s\n", rdmamsg_last_error(NULL));
 *     return 1;
 *   }
 *   rdmamsg_register(c, "inbox", 5000);
 *   uint64_t id;
 *   rdmamsg_send(c, "beta", "inbox", "hello", 5, &id);
 *   rdmamsg_completion done;
 *   rdmamsg_wait_completion(c, &done, 30000);   // RDMAMSG_OK once delivered
 *   rdmamsg_message m;
 *   if (rdmamsg_receive(c, &m, 1000) == RDMAMSG_OK)
 *     printf("%.*s from %s/%s\n", (int)m.size, (const char *)m.payload, m.src_node, m.src_service);
 *   rdmamsg_close(c);
 *
 * Timeouts are in milliseconds; a negative timeout waits without limit.
 *
 * Every function returns an rdmamsg_errc; on failure rdmamsg_last_error(c)
 * says why (rdmamsg_last_error(NULL) for a failed rdmamsg_connect). A
 * client is not thread-safe: use one per thread, or lock around it.
 * Strings and payloads handed out stay valid until the next call on the
 * same client that hands out the same kind of thing.
 *
 * Event loops: poll rdmamsg_fd() for POLLIN (and POLLOUT while
 * rdmamsg_wants_write()), call rdmamsg_process_io(), then drain
 * rdmamsg_try_receive() and rdmamsg_poll_completion(); send with
 * rdmamsg_try_send(), which never waits (RDMAMSG_WOULD_BLOCK: retry once
 * the fd is writable).
 */
#ifndef RDMAMSG_RDMAMSG_H
#define RDMAMSG_RDMAMSG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The same codes as rdmamsg::Errc. */
typedef enum rdmamsg_errc {
  RDMAMSG_OK = 0,
  RDMAMSG_UNKNOWN_NODE = 1,       /* destination node is not configured */
  RDMAMSG_UNKNOWN_SERVICE = 2,    /* no listener for the service on that node */
  RDMAMSG_PEER_UNREACHABLE = 3,   /* peer daemon down, or connection lost before delivery */
  RDMAMSG_TOO_LARGE = 4,          /* over the maximum message size */
  RDMAMSG_TIMEOUT = 5,            /* nothing within the time given */
  RDMAMSG_BAD_REQUEST = 6,        /* bad name, bad argument */
  RDMAMSG_DUPLICATE_SERVICE = 7,  /* the service is registered by another client */
  RDMAMSG_BUSY = 8,               /* resource exhausted; retry later */
  RDMAMSG_SHUTTING_DOWN = 9,      /* the daemon is stopping */
  RDMAMSG_PROTOCOL_ERROR = 10,    /* malformed frame; the connection is closed */
  RDMAMSG_IO_ERROR = 11,          /* socket error (connect, read, write) */
  RDMAMSG_NOT_CONNECTED = 12,     /* the client is closed */
  RDMAMSG_WOULD_BLOCK = 13,       /* rdmamsg_try_send: the socket is full */
  RDMAMSG_PERMISSION_DENIED = 14, /* the daemon's local_policy refuses this client the request */
  RDMAMSG_NO_SUBSCRIBERS = 15,    /* a publish matched no subscription anywhere in the mesh */
  RDMAMSG_NO_RESPONDERS = 16      /* a request matched no subscription: nobody can answer it */
} rdmamsg_errc;

typedef struct rdmamsg_client rdmamsg_client;

/* A received message; valid until the next rdmamsg_receive/try_receive.
 * A message sent to a service names it in `service`; a message published
 * to a subject names the subscription and the subject (and carries a
 * reply token in `reply_to` when it is a request: answer with
 * rdmamsg_reply()); a reply to a request names the request. */
typedef struct rdmamsg_message {
  const char* src_node;    /* the sender's node */
  const char* src_service; /* the sender's service ("" if it registered none, or a subject's) */
  const char* service;     /* the local service it was addressed to ("" for subjects) */
  const void* payload;
  size_t size;
  const char* subject;   /* a publish: its subject; else "" */
  const char* reply_to;  /* a request: its reply token; else "" */
  uint64_t subscription; /* a publish: the id rdmamsg_subscribe() gave; else 0 */
  uint64_t request_id;   /* a reply: the id rdmamsg_request() gave; else 0 */
} rdmamsg_message;

/* The outcome of one sent message; `message` is valid until the next
 * completion is taken. A publish's comes once every subscription it
 * matched took it or dropped it, with the counts (RDMAMSG_NO_SUBSCRIBERS
 * when none matched); a request has one only when no reply came
 * (RDMAMSG_NO_RESPONDERS, RDMAMSG_TIMEOUT, RDMAMSG_PEER_UNREACHABLE). */
typedef struct rdmamsg_completion {
  uint64_t msg_id;
  rdmamsg_errc code; /* RDMAMSG_OK once a listener of the service has it */
  const char* message;
  uint32_t matched; /* a publish: subscriptions matched (a queue group counts once) */
  uint32_t taken;   /* of those, the ones whose application took it */
  uint32_t dropped; /* of those, the ones that dropped it (slow consumers) */
} rdmamsg_completion;

/* The system calls the library has made for a client since it connected,
 * by call (rdmamsg_counters). */
typedef struct rdmamsg_counters {
  uint64_t socket_reads;   /* recv(2) on the daemon's socket */
  uint64_t socket_writes;  /* send(2) on it */
  uint64_t polls;          /* poll(2) of a blocking call that waits */
  uint64_t doorbell_rings; /* write(2) to an eventfd: the daemon's doorbell, or its own */
  uint64_t doorbell_reads; /* read(2) of its own doorbell */
  uint64_t syscalls;       /* all of them */
} rdmamsg_counters;

/* Connects to rdmamsgd at `socket_path` (NULL or "": $RDMAMSG_SOCKET, else
 * /run/rdmamsg/rdmamsgd.sock) as `client_name` (NULL: "librdmamsg"); waits
 * up to timeout_ms for the handshake. *out is NULL on failure. */
rdmamsg_errc rdmamsg_connect(const char* socket_path, const char* client_name, int timeout_ms,
                             rdmamsg_client** out);
/* Says goodbye, closes and frees; NULL is ignored. */
void rdmamsg_close(rdmamsg_client* c);

/* Why the last failing call on `c` failed (NULL: the last rdmamsg_connect
 * of this thread); "" when none did. */
const char* rdmamsg_last_error(const rdmamsg_client* c);
/* "unknown_service", ... */
const char* rdmamsg_errc_name(int code);

const char* rdmamsg_node_name(const rdmamsg_client* c); /* the daemon's node */
uint32_t rdmamsg_max_message_size(const rdmamsg_client* c);

rdmamsg_errc rdmamsg_register(rdmamsg_client* c, const char* service, int timeout_ms);
rdmamsg_errc rdmamsg_unregister(rdmamsg_client* c, const char* service);

/* Queues a message to node/service; *id (if not NULL) gets its id, which
 * its completion names: RDMAMSG_OK once the receiving application has taken
 * it. Never waits for delivery; when more than a few MiB are unwritten it
 * waits for the socket, and while the daemon holds node/service (its
 * listener does not keep up) it waits for the daemon to resume it. */
rdmamsg_errc rdmamsg_send(rdmamsg_client* c, const char* node, const char* service,
                          const void* payload, size_t size, uint64_t* id);
/* The same, never waiting: RDMAMSG_WOULD_BLOCK (nothing queued) when the
 * daemon holds node/service or the socket is full; other destinations are
 * not held. */
rdmamsg_errc rdmamsg_try_send(rdmamsg_client* c, const char* node, const char* service,
                              const void* payload, size_t size, uint64_t* id);
/* Zero-copy send: reserves size bytes for the payload of one message to
 * node/service and points *payload at them; the application writes the
 * payload there, then rdmamsg_commit() queues the message as rdmamsg_send()
 * would (*id, if not NULL, gets its id) or rdmamsg_abort() gives the bytes
 * back unsent. Over shared memory a claim of 16 KiB or more lies in the
 * payload area the daemon sends from, so nothing copies the payload on this
 * host. One claim at a time: rdmamsg_claim() again is RDMAMSG_BAD_REQUEST
 * until it is committed or aborted; *payload stays valid until then or
 * rdmamsg_close(c). A commit that fails gives the claim back. */
rdmamsg_errc rdmamsg_claim(rdmamsg_client* c, const char* node, const char* service, size_t size,
                           void** payload);
/* The same for a publish to subject: rdmamsg_commit() then publishes it as
 * rdmamsg_publish() would. */
rdmamsg_errc rdmamsg_claim_publish(rdmamsg_client* c, const char* subject, size_t size,
                                   void** payload);
rdmamsg_errc rdmamsg_commit(rdmamsg_client* c, uint64_t* id);
/* RDMAMSG_BAD_REQUEST when no claim is held. */
rdmamsg_errc rdmamsg_abort(rdmamsg_client* c);
/* Writes everything queued, up to timeout_ms. */
rdmamsg_errc rdmamsg_flush(rdmamsg_client* c, int timeout_ms);

/* Subjects: dot-separated tokens ("prices.eu.x"); a subscription's pattern
 * may use '*' for one token and '>' (last) for the rest; at most 255 bytes
 * and 32 tokens. A bad one is RDMAMSG_BAD_REQUEST before anything is sent.
 *
 * What a subscription's daemon does once `pending_limit` (0: the daemon's
 * pending_limit) of its messages are delivered and not taken. */
typedef enum rdmamsg_slow_consumer {
  RDMAMSG_SLOW_DROP = 0, /* drop for this subscription alone, counted (the default) */
  RDMAMSG_SLOW_BLOCK = 1 /* lossless: hold its publishers until it takes */
} rdmamsg_slow_consumer;
/* Subscribes to `pattern`, waiting up to timeout_ms for the daemon;
 * `group` (NULL or "": none) makes it a member of a queue group, each
 * message going to one member. *id (if not NULL) names it in messages. */
rdmamsg_errc rdmamsg_subscribe(rdmamsg_client* c, const char* pattern, const char* group,
                               int policy, uint32_t pending_limit, int timeout_ms, uint64_t* id);
rdmamsg_errc rdmamsg_unsubscribe(rdmamsg_client* c, uint64_t id);
/* Queues a publish; its completion names *id. Waits as rdmamsg_send() does. */
rdmamsg_errc rdmamsg_publish(rdmamsg_client* c, const char* subject, const void* payload,
                             size_t size, uint64_t* id);
/* Queues a request (timeout_ms > 0); its first reply arrives as a message
 * whose request_id is *id, or its completion says why none came. */
rdmamsg_errc rdmamsg_request(rdmamsg_client* c, const char* subject, const void* payload,
                             size_t size, int timeout_ms, uint64_t* id);
/* Sends a request and waits for its reply, put in *reply (valid as a
 * received message) and taken out of turn: messages received before it
 * stay queued. RDMAMSG_NO_RESPONDERS at once when nothing subscribes. */
rdmamsg_errc rdmamsg_request_wait(rdmamsg_client* c, const char* subject, const void* payload,
                                  size_t size, rdmamsg_message* reply, int timeout_ms);
/* Queues the reply to a request, named by its message's reply_to; its
 * completion: RDMAMSG_OK once the requester took it, RDMAMSG_UNKNOWN_SERVICE
 * when the request was answered already or expired. */
rdmamsg_errc rdmamsg_reply(rdmamsg_client* c, const char* reply_to, const void* payload,
                           size_t size, uint64_t* id);

/* Waits up to timeout_ms (0: does not wait) for a message; RDMAMSG_TIMEOUT
 * if none came. A message returned counts as taken: its sender is confirmed. */
rdmamsg_errc rdmamsg_receive(rdmamsg_client* c, rdmamsg_message* out, int timeout_ms);
/* 1 and *out set when a message was waiting, else 0. */
int rdmamsg_try_receive(rdmamsg_client* c, rdmamsg_message* out);
/* Zero-copy receive: as rdmamsg_receive(), but out->payload points into
 * the client's own input buffer instead of a copy; the view (payload and
 * names) is valid until rdmamsg_release_view(c) or rdmamsg_close(c). One
 * view at a time: until it is released, rdmamsg_receive(),
 * rdmamsg_receive_view() (RDMAMSG_BAD_REQUEST) and their try forms (0)
 * refuse; sending, completions and rdmamsg_process_io() go on and never
 * move the viewed bytes. The message counts as taken, and its sender is
 * confirmed, at rdmamsg_release_view(); one still held at rdmamsg_close()
 * fails back to its sender. */
rdmamsg_errc rdmamsg_receive_view(rdmamsg_client* c, rdmamsg_message* out, int timeout_ms);
/* 1 and *out set when a message was waiting, else 0. */
int rdmamsg_try_receive_view(rdmamsg_client* c, rdmamsg_message* out);
/* Ends the view: the message is taken. RDMAMSG_BAD_REQUEST when no view is
 * held (released already). */
rdmamsg_errc rdmamsg_release_view(rdmamsg_client* c);
/* With on = 0, messages returned count as taken (their senders confirmed)
 * only at the next rdmamsg_confirm_received(), which covers every message
 * returned so far: for applications that hand messages on first. */
void rdmamsg_set_confirm_on_receive(rdmamsg_client* c, int on);
rdmamsg_errc rdmamsg_confirm_received(rdmamsg_client* c);

/* Waits up to timeout_ms for the next completion; RDMAMSG_TIMEOUT if none. */
rdmamsg_errc rdmamsg_wait_completion(rdmamsg_client* c, rdmamsg_completion* out, int timeout_ms);
/* 1 and *out set when a completion was waiting, else 0. */
int rdmamsg_poll_completion(rdmamsg_client* c, rdmamsg_completion* out);
/* Messages sent whose completion has not been taken yet. */
size_t rdmamsg_in_flight(const rdmamsg_client* c);
/* The system calls made so far (rdmamsg_counters). */
void rdmamsg_get_counters(const rdmamsg_client* c, rdmamsg_counters* out);

/* The daemon's status as JSON (free it with rdmamsg_free). */
rdmamsg_errc rdmamsg_status(rdmamsg_client* c, char** json, int timeout_ms);
void rdmamsg_free(void* p);

/* Event-loop integration (see the top of this file). */
int rdmamsg_fd(const rdmamsg_client* c);
int rdmamsg_wants_write(const rdmamsg_client* c);
rdmamsg_errc rdmamsg_process_io(rdmamsg_client* c);
/* Before polling rdmamsg_fd() with the adaptive or busy strategy (below):
 * asks the daemon to ring the fd for what comes next; 0 when something
 * came meanwhile (call rdmamsg_process_io() and drain instead of polling). */
int rdmamsg_prepare_to_poll(rdmamsg_client* c);

/* How the blocking calls wait over shared memory (rdmamsg::IdleStrategy):
 * sleep at once (the default), spin for a bounded time first, or spin until
 * the deadline (for a dedicated core). RDMAMSG_IDLE=sleep|adaptive|busy sets
 * it for every client of a process at connect. Over the socket every
 * strategy sleeps. */
typedef enum rdmamsg_idle_strategy {
  RDMAMSG_IDLE_SLEEP = 0,
  RDMAMSG_IDLE_ADAPTIVE = 1,
  RDMAMSG_IDLE_BUSY = 2
} rdmamsg_idle_strategy;
/* RDMAMSG_BAD_REQUEST for a value not listed above. */
rdmamsg_errc rdmamsg_set_idle_strategy(rdmamsg_client* c, int strategy);
int rdmamsg_get_idle_strategy(const rdmamsg_client* c);

#ifdef __cplusplus
}
#endif

#endif /* RDMAMSG_RDMAMSG_H */
