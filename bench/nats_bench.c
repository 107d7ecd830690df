/* nats_bench: the NATS side of bench/subjects.sh — the same modes and the same JSON result
 * lines as bench/subjects_bench.cc, with the NATS C client (libnats) against nats-server.
 *
 * Fairness (docs/performance.md, "Subjects"): the subscriptions' pending limits are lifted
 * (natsSubscription_SetPendingLimits(-1, -1)) and their drops reported; round trips use
 * natsOptions_SetSendAsap on both connections (otherwise the client hands every publish to its
 * flusher thread); streams keep the default buffering and flush at the end. NATS core
 * confirms nothing: a publish is done when it is written. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "subjects_common.h"

#define MAX_UNTIL 4

static int usage(void) {
  fprintf(stderr,
          "usage: nats_bench MODE --url URL [options]\n"
          "  sub-sink --subject S --count N [--subs K] [--ready-file F] [--idle-timeout SEC]\n"
          "      K connections, one subscription each; each takes N data messages\n"
          "  pub-stream --subject S --count N --size B [--id P]   publish, then flush\n"
          "  probe --subject S --until FILE... [--timeout SEC]    publish probes until the files "
          "exist\n"
          "  reply-echo --subject S [--ready-file F]              answer requests until SIGTERM\n"
          "  request-latency --subject S --count N --size B [--warmup W]\n"
          "  hold-subs --subject S --count M [--ready-file F]     hold M subscriptions S.n0 .. "
          "S.n<M-1>\n"
          "      (none matching S.*'s other subjects) until SIGTERM; ready once S.n<M-1> got a "
          "probe\n"
          "  [--send-asap 0|1]: default 1 for probe, reply-echo and request-latency, else 0\n");
  return 2;
}

typedef struct {
  const char* mode;
  const char* url;
  const char* subject;
  const char* readyFile;
  const char* until[MAX_UNTIL];
  int untilCount;
  long count;
  long size;
  long subs;
  long id;
  long warmup;
  long window; /* accepted for symmetry with subjects_bench; NATS confirms nothing */
  long timeoutSec;
  long idleTimeoutSec;
  int sendAsap; /* -1: the mode's default */
} args_t;

static void die(const char* what, natsStatus s) {
  fprintf(stderr, "nats_bench: %s: %s (%s)\n", what, natsStatus_GetText(s),
          nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
  exit(1);
}

static bool parse(int argc, char** argv, args_t* a) {
  memset(a, 0, sizeof *a);
  a->subs = 1;
  a->warmup = 1000;
  a->timeoutSec = 30;
  a->idleTimeoutSec = 30;
  a->sendAsap = -1;
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i < argc; i++) {
    const char* k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (!strcmp(k, "--url"))
      a->url = v;
    else if (!strcmp(k, "--subject"))
      a->subject = v;
    else if (!strcmp(k, "--ready-file"))
      a->readyFile = v;
    else if (!strcmp(k, "--until") && a->untilCount < MAX_UNTIL)
      a->until[a->untilCount++] = v;
    else if (!strcmp(k, "--count"))
      a->count = strtol(v, NULL, 10);
    else if (!strcmp(k, "--size"))
      a->size = strtol(v, NULL, 10);
    else if (!strcmp(k, "--subs"))
      a->subs = strtol(v, NULL, 10);
    else if (!strcmp(k, "--id"))
      a->id = strtol(v, NULL, 10);
    else if (!strcmp(k, "--warmup"))
      a->warmup = strtol(v, NULL, 10);
    else if (!strcmp(k, "--window"))
      a->window = strtol(v, NULL, 10);
    else if (!strcmp(k, "--timeout"))
      a->timeoutSec = strtol(v, NULL, 10);
    else if (!strcmp(k, "--idle-timeout"))
      a->idleTimeoutSec = strtol(v, NULL, 10);
    else if (!strcmp(k, "--send-asap"))
      a->sendAsap = (int)strtol(v, NULL, 10);
    else
      return false;
  }
  return a->url != NULL && a->subject != NULL;
}

/* SIGTERM and SIGINT are blocked in every thread (the library's too: they are created after
 * main blocks them) and taken with sigtimedwait by the loops that run until stopped. */
static sigset_t stopSignals;
static bool stopRequested(long waitMs) {
  struct timespec ts = {waitMs / 1000, (waitMs % 1000) * 1000000L};
  return sigtimedwait(&stopSignals, NULL, &ts) > 0;
}

static void touch(const char* path) {
  if (path == NULL) return;
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}

static bool exists(const char* path) {
  return access(path, F_OK) == 0;
}

/* Slow-consumer events the library reported (its drops are counted per subscription). */
static volatile int64_t asyncErrors;
static void onError(natsConnection* nc, natsSubscription* sub, natsStatus err, void* closure) {
  (void)nc;
  (void)sub;
  (void)closure;
  (void)err;
  __atomic_add_fetch(&asyncErrors, 1, __ATOMIC_RELAXED);
}

static natsConnection* connectTo(const args_t* a, bool asapDefault, const char* name) {
  natsOptions* opts = NULL;
  natsConnection* nc = NULL;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, a->url);
  if (s == NATS_OK) s = natsOptions_SetName(opts, name);
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, false);
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 5000);
  if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts, onError, NULL);
  if (s == NATS_OK)
    s = natsOptions_SetSendAsap(opts, a->sendAsap < 0 ? asapDefault : a->sendAsap != 0);
  if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) die("connect", s);
  return nc;
}

static natsSubscription* subscribe(natsConnection* nc, const char* subject) {
  natsSubscription* sub = NULL;
  natsStatus s = natsConnection_SubscribeSync(&sub, nc, subject);
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub, -1, -1);
  if (s != NATS_OK) die("subscribe", s);
  return sub;
}

/* --- sub-sink ------------------------------------------------------------------------------ */

typedef struct {
  const args_t* a;
  sb_stream stream;
  int64_t dropped;
  bool failed;
  pthread_t thread;
} sink_t;

static pthread_mutex_t readyLock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t readyCond = PTHREAD_COND_INITIALIZER;
static long readyCount;

static void markReady(void) {
  pthread_mutex_lock(&readyLock);
  readyCount++;
  pthread_cond_broadcast(&readyCond);
  pthread_mutex_unlock(&readyLock);
}

static void* sinkMain(void* arg) {
  sink_t* k = arg;
  const args_t* a = k->a;
  natsConnection* nc = connectTo(a, false, "nats_bench sub-sink");
  natsSubscription* sub = subscribe(nc, a->subject);
  natsStatus s = natsConnection_FlushTimeout(nc, 5000); /* the server has the subscription */
  if (s != NATS_OK) die("flush", s);
  sb_stream_init(&k->stream);
  uint64_t lastEvent = sb_now_ns();
  while (k->stream.received < (uint64_t)a->count) {
    natsMsg* m = NULL;
    s = natsSubscription_NextMsg(&m, sub, 100);
    if (s == NATS_TIMEOUT) {
      if (sb_now_ns() - lastEvent > (uint64_t)a->idleTimeoutSec * 1000000000ull) {
        k->failed = true;
        break;
      }
      continue;
    }
    if (s != NATS_OK) {
      fprintf(stderr, "nats_bench: sub-sink: %s\n", natsStatus_GetText(s));
      k->failed = true;
      break;
    }
    const uint64_t probesBefore = k->stream.probes;
    sb_stream_take(&k->stream, natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m));
    if (probesBefore == 0 && k->stream.probes == 1) markReady();
    natsMsg_Destroy(m);
    lastEvent = k->stream.lastNs ? k->stream.lastNs : sb_now_ns();
  }
  natsSubscription_GetDropped(sub, &k->dropped);
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
  return NULL;
}

static void printStream(const char* system, const args_t* a, sink_t* sinks, long n) {
  uint64_t received = 0, bytes = 0, outOfOrder = 0, gaps = 0, start = UINT64_MAX, last = 0;
  int64_t dropped = 0;
  bool complete = true;
  for (long i = 0; i < n; i++) {
    const sb_stream* s = &sinks[i].stream;
    received += s->received;
    bytes += s->bytes;
    outOfOrder += s->outOfOrder;
    gaps += s->gaps;
    dropped += sinks[i].dropped;
    if (s->received && s->firstStartNs < start) start = s->firstStartNs;
    if (s->lastNs > last) last = s->lastNs;
    if (sinks[i].failed || s->received < (uint64_t)a->count) complete = false;
  }
  const double secs = received && last > start ? (double)(last - start) / 1e9 : 0;
  const double perSub = n ? (double)received / (double)n : 0;
  const long size = received ? (long)(bytes / received) : a->size;
  printf(
      "{\"system\": \"%s\", \"mode\": \"sub-sink\", \"subs\": %ld, \"size\": %ld, \"count\": %ld, "
      "\"received\": %" PRIu64
      ", \"complete\": %s, \"seconds\": %.6f, \"msgs_per_sec\": %.1f, "
      "\"deliveries_per_sec\": %.1f, \"mb_per_sec\": %.2f, \"out_of_order\": %" PRIu64
      ", \"gaps\": %" PRIu64 ", \"dropped\": %" PRId64 ", \"slow_consumer_events\": %" PRId64 "}\n",
      system, n, size, a->count, received, complete ? "true" : "false", secs,
      secs > 0 ? perSub / secs : 0, secs > 0 ? (double)received / secs : 0,
      secs > 0 ? (double)bytes / (double)n / 1e6 / secs : 0, outOfOrder, gaps, dropped,
      (int64_t)asyncErrors);
}

static int subSink(const args_t* a) {
  if (a->count <= 0 || a->subs <= 0) return usage();
  sink_t* sinks = calloc((size_t)a->subs, sizeof *sinks);
  for (long i = 0; i < a->subs; i++) {
    sinks[i].a = a;
    pthread_create(&sinks[i].thread, NULL, sinkMain, &sinks[i]);
  }
  /* Ready once every subscription took a probe: the publisher's server knows them all. */
  pthread_mutex_lock(&readyLock);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += a->idleTimeoutSec;
  while (readyCount < a->subs &&
         pthread_cond_timedwait(&readyCond, &readyLock, &deadline) != ETIMEDOUT) {
  }
  const bool ready = readyCount == a->subs;
  pthread_mutex_unlock(&readyLock);
  if (ready) touch(a->readyFile);
  for (long i = 0; i < a->subs; i++)
    pthread_join(sinks[i].thread, NULL);
  printStream("nats", a, sinks, a->subs);
  bool ok = true;
  for (long i = 0; i < a->subs; i++)
    ok = ok && !sinks[i].failed;
  free(sinks);
  return ok ? 0 : 1;
}

/* --- pub-stream ------------------------------------------------------------------------------ */

static int pubStream(const args_t* a) {
  if (a->count <= 0 || a->size < SB_HEADER) return usage();
  natsConnection* nc = connectTo(a, false, "nats_bench pub-stream");
  char* buf = calloc(1, (size_t)a->size);
  memset(buf + SB_HEADER, 'x', (size_t)a->size - SB_HEADER);
  sb_header h = {SB_KIND_DATA, (uint32_t)a->id, 0, sb_now_ns()};
  const uint64_t t0 = h.startNs;
  for (long i = 0; i < a->count; i++) {
    h.seq = (uint64_t)i;
    sb_put(buf, &h);
    natsStatus s = natsConnection_Publish(nc, a->subject, buf, (int)a->size);
    if (s != NATS_OK) die("publish", s);
  }
  natsStatus s = natsConnection_FlushTimeout(nc, a->timeoutSec * 1000);
  if (s != NATS_OK) die("flush", s);
  const double secs = (double)(sb_now_ns() - t0) / 1e9;
  printf(
      "{\"system\": \"nats\", \"mode\": \"pub-stream\", \"size\": %ld, \"count\": %ld, "
      "\"seconds\": %.6f, \"msgs_per_sec\": %.1f, \"mb_per_sec\": %.2f, \"window\": null, "
      "\"confirmed\": false, \"matched\": null, \"taken\": null, \"dropped\": null, "
      "\"no_subscribers\": null, \"errors\": 0}\n",
      a->size, a->count, secs, (double)a->count / secs,
      (double)a->count * (double)a->size / 1e6 / secs);
  free(buf);
  natsConnection_Destroy(nc);
  return 0;
}

/* --- probe ------------------------------------------------------------------------------------ */

static bool allExist(const args_t* a) {
  for (int i = 0; i < a->untilCount; i++)
    if (!exists(a->until[i])) return false;
  return true;
}

static int probe(const args_t* a) {
  if (a->untilCount == 0) return usage();
  natsConnection* nc = connectTo(a, true, "nats_bench probe");
  char buf[64] = {0};
  sb_header h = {SB_KIND_PROBE, (uint32_t)a->id, 0, sb_now_ns()};
  const uint64_t deadline = h.startNs + (uint64_t)a->timeoutSec * 1000000000ull;
  while (!allExist(a)) {
    if (sb_now_ns() > deadline) {
      fprintf(stderr, "nats_bench: probe: no answer on %s within %ld s\n", a->subject,
              a->timeoutSec);
      natsConnection_Destroy(nc);
      return 1;
    }
    sb_put(buf, &h);
    h.seq++;
    natsStatus s = natsConnection_Publish(nc, a->subject, buf, sizeof buf);
    if (s != NATS_OK) die("publish", s);
    if (stopRequested(2)) { /* the pace of the probes, not a synchronisation */
      natsConnection_Destroy(nc);
      return 1;
    }
  }
  natsConnection_Destroy(nc);
  return 0;
}

/* --- reply-echo and request-latency ------------------------------------------------------------
 */

static int replyEcho(const args_t* a) {
  natsConnection* nc = connectTo(a, true, "nats_bench reply-echo");
  natsSubscription* sub = subscribe(nc, a->subject);
  natsStatus s = natsConnection_FlushTimeout(nc, 5000);
  if (s != NATS_OK) die("flush", s);
  bool ready = false;
  long answered = 0;
  while (!stopRequested(0)) {
    natsMsg* m = NULL;
    s = natsSubscription_NextMsg(&m, sub, 100);
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) die("next message", s);
    const char* reply = natsMsg_GetReply(m);
    if (reply != NULL && reply[0] != '\0') {
      s = natsConnection_Publish(nc, reply, natsMsg_GetData(m), natsMsg_GetDataLength(m));
      if (s != NATS_OK) die("publish reply", s);
      answered++;
    } else if (!ready) {
      ready = true; /* a probe: the requester's server knows this subscription */
      touch(a->readyFile);
    }
    natsMsg_Destroy(m);
    if (a->count > 0 && answered >= a->count) break;
  }
  int64_t dropped = 0;
  natsSubscription_GetDropped(sub, &dropped);
  fprintf(stderr, "nats_bench: reply-echo: answered %ld, dropped %" PRId64 "\n", answered, dropped);
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
  return 0;
}

static int requestLatency(const args_t* a) {
  if (a->count <= 0 || a->size < SB_HEADER) return usage();
  natsConnection* nc = connectTo(a, true, "nats_bench request-latency");
  char* buf = calloc(1, (size_t)a->size);
  double* us = calloc((size_t)a->count, sizeof *us);
  sb_header h = {SB_KIND_DATA, (uint32_t)a->id, 0, sb_now_ns()};
  long failed = 0;
  for (long i = 0; i < a->warmup + a->count; i++) {
    h.seq = (uint64_t)i;
    sb_put(buf, &h);
    natsMsg* reply = NULL;
    const uint64_t t0 = sb_now_ns();
    natsStatus s =
        natsConnection_Request(&reply, nc, a->subject, buf, (int)a->size, a->timeoutSec * 1000);
    const uint64_t t1 = sb_now_ns();
    if (s != NATS_OK) die("request", s);
    sb_header back;
    if (!sb_get(natsMsg_GetData(reply), (size_t)natsMsg_GetDataLength(reply), &back) ||
        back.seq != h.seq)
      failed++;
    natsMsg_Destroy(reply);
    if (i >= a->warmup) us[i - a->warmup] = (double)(t1 - t0) / 1e3;
  }
  double mean, max;
  const size_t n = (size_t)a->count;
  sb_latency_stats(us, n, &mean, &max);
  printf(
      "{\"system\": \"nats\", \"mode\": \"request-latency\", \"size\": %ld, \"count\": %ld, "
      "\"warmup\": %ld, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, \"mean_us\": %.2f, "
      "\"max_us\": %.2f, \"wrong_replies\": %ld}\n",
      a->size, a->count, a->warmup, sb_percentile(us, n, 50), sb_percentile(us, n, 99),
      sb_percentile(us, n, 99.9), mean, max, failed);
  free(us);
  free(buf);
  natsConnection_Destroy(nc);
  return failed ? 1 : 0;
}

/* --- hold-subs ----------------------------------------------------------------------------------
 */

static int holdSubs(const args_t* a) {
  if (a->count <= 0) return usage();
  natsConnection* nc = connectTo(a, false, "nats_bench hold-subs");
  natsSubscription** subs = calloc((size_t)a->count, sizeof *subs);
  const uint64_t t0 = sb_now_ns();
  char name[256];
  for (long i = 0; i < a->count; i++) {
    snprintf(name, sizeof name, "%s.n%ld", a->subject, i);
    natsStatus s = natsConnection_SubscribeSync(&subs[i], nc, name);
    if (s != NATS_OK) die("subscribe", s);
  }
  natsStatus s = natsConnection_FlushTimeout(nc, 60000);
  if (s != NATS_OK) die("flush", s);
  const double setup = (double)(sb_now_ns() - t0) / 1e9;
  /* The routes carry interest in order: once the other side's probe reaches the last
   * subscription, that side has heard of all of them. */
  bool ready = false;
  while (!stopRequested(0)) {
    if (ready) {
      int sig;
      sigwait(&stopSignals, &sig);
      break;
    }
    natsMsg* m = NULL;
    s = natsSubscription_NextMsg(&m, subs[a->count - 1], 100);
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) die("next message", s);
    natsMsg_Destroy(m);
    ready = true;
    printf(
        "{\"system\": \"nats\", \"mode\": \"hold-subs\", \"subscriptions\": %ld, "
        "\"setup_seconds\": %.3f, \"ready_seconds\": %.3f}\n",
        a->count, setup, (double)(sb_now_ns() - t0) / 1e9);
    touch(a->readyFile);
  }
  for (long i = 0; i < a->count; i++)
    natsSubscription_Destroy(subs[i]);
  free(subs);
  natsConnection_Destroy(nc);
  return 0;
}

int main(int argc, char** argv) {
  args_t a;
  if (!parse(argc, argv, &a)) return usage();
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, NULL);
  natsStatus s = nats_Open(-1);
  if (s != NATS_OK) die("nats_Open", s);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc;
  if (!strcmp(a.mode, "sub-sink"))
    rc = subSink(&a);
  else if (!strcmp(a.mode, "pub-stream"))
    rc = pubStream(&a);
  else if (!strcmp(a.mode, "probe"))
    rc = probe(&a);
  else if (!strcmp(a.mode, "reply-echo"))
    rc = replyEcho(&a);
  else if (!strcmp(a.mode, "request-latency"))
    rc = requestLatency(&a);
  else if (!strcmp(a.mode, "hold-subs"))
    rc = holdSubs(&a);
  else
    rc = usage();
  nats_Close();
  return rc;
}
