/* What bench/nats_bench.c and bench/subjects_bench.cc share (bench/subjects.sh): the layout
 * of a message's first bytes, the clock, the per-publisher order check and the percentiles.
 * C, so that both the C and the C++ program include it.
 *
 * Every message starts with a header of 24 bytes (host byte order: both ends are on one
 * machine): a kind (data or probe), the publisher's id, the message's sequence number within
 * that publisher (from 0) and the publisher's CLOCK_MONOTONIC time before its first publish,
 * so that a subscriber measures from the first publish to its last delivery. */
#ifndef RDMAMSG_BENCH_SUBJECTS_COMMON_H
#define RDMAMSG_BENCH_SUBJECTS_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SB_KIND_DATA 0x61746164u  /* "data" */
#define SB_KIND_PROBE 0x626f7270u /* "prob" */
#define SB_HEADER 24
#define SB_MAX_PUBLISHERS 64

typedef struct {
  uint32_t kind;
  uint32_t publisher;
  uint64_t seq;
  uint64_t startNs;
} sb_header;

static inline uint64_t sb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void sb_put(void* buf, const sb_header* h) {
  memcpy(buf, h, sizeof *h);
}

/* 0 when the payload is too short to hold a header. */
static inline int sb_get(const void* buf, size_t len, sb_header* h) {
  if (len < SB_HEADER) return 0;
  memcpy(h, buf, sizeof *h);
  return 1;
}

/* One subscriber's view of the stream: counts, and the order per publisher (each publisher's
 * messages must arrive in its order, without gaps and without duplicates). */
typedef struct {
  uint64_t received; /* data messages */
  uint64_t bytes;
  uint64_t probes;
  uint64_t outOfOrder; /* a sequence number at or below one already seen */
  uint64_t gaps;       /* sequence numbers skipped */
  uint64_t firstStartNs;
  uint64_t lastNs; /* when the last data message was taken */
  int64_t next[SB_MAX_PUBLISHERS];
} sb_stream;

static inline void sb_stream_init(sb_stream* s) {
  memset(s, 0, sizeof *s);
}

/* Counts one message; returns its kind (0: not one of ours). */
static inline uint32_t sb_stream_take(sb_stream* s, const void* buf, size_t len) {
  sb_header h;
  if (!sb_get(buf, len, &h)) return 0;
  if (h.kind == SB_KIND_PROBE) {
    s->probes++;
    return h.kind;
  }
  if (h.kind != SB_KIND_DATA) return 0;
  s->received++;
  s->bytes += len;
  s->lastNs = sb_now_ns();
  if (s->firstStartNs == 0 || h.startNs < s->firstStartNs) s->firstStartNs = h.startNs;
  const uint32_t p = h.publisher % SB_MAX_PUBLISHERS;
  if ((int64_t)h.seq < s->next[p]) {
    s->outOfOrder++;
  } else {
    s->gaps += (uint64_t)((int64_t)h.seq - s->next[p]);
    s->next[p] = (int64_t)h.seq + 1;
  }
  return h.kind;
}

static inline int sb_cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The p-th percentile of n sorted samples (nearest rank, as bench/zmq_bench.cc). */
static inline double sb_percentile(const double* sorted, size_t n, double p) {
  size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
  if (i >= n) i = n - 1;
  return sorted[i];
}

/* Round-trip times in microseconds -> sorted in place; mean and max out. */
static inline void sb_latency_stats(double* us, size_t n, double* mean, double* max) {
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += us[i];
  qsort(us, n, sizeof *us, sb_cmp_double);
  *mean = n ? sum / (double)n : 0;
  *max = n ? us[n - 1] : 0;
}

#endif
