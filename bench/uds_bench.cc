// uds_bench: the physical floor for bench/compare.sh — one raw Unix-socket hop between two
// processes (a socketpair across fork): length-prefixed throughput, one-outstanding ping-pong
// round trips, and a stdin -> socket -> stdout line stream.
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>
#include <vector>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: uds_bench throughput --size S --count N [--batch BYTES]   (0: one "
               "write per message)\n"
               "       uds_bench latency --size S --count N [--warmup W]\n"
               "       uds_bench lines --count N [--per-line]   stdin -> hop -> stdout, exits "
               "after N lines\n");
  return 2;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "uds_bench: %s: %s\n", what, std::strerror(errno));
  std::_Exit(1);
}

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Args {
  long size = 64;
  long count = 0;
  long warmup = 1000;
  long batch = 65536;
  bool perLine = false;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) std::exit(usage());
      return std::strtol(argv[++i], nullptr, 10);
    };
    if (s == "--size")
      a.size = value();
    else if (s == "--count")
      a.count = value();
    else if (s == "--warmup")
      a.warmup = value();
    else if (s == "--batch")
      a.batch = value();
    else if (s == "--per-line")
      a.perLine = true;
    else
      std::exit(usage());
  }
  return a;
}

void writeAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("write");
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void readAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = read(fd, p, len);
    if (n == 0) die("read: peer closed");
    if (n < 0) {
      if (errno == EINTR) continue;
      die("read");
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

// One frame: a 4-byte length and the payload, in one writev (the unbatched sender).
void writeFrame(int fd, const std::vector<char>& payload) {
  const auto len = static_cast<uint32_t>(payload.size());
  iovec iov[2] = {{const_cast<uint32_t*>(&len), sizeof len},
                  {const_cast<char*>(payload.data()), payload.size()}};
  size_t total = sizeof len + payload.size();
  ssize_t n = writev(fd, iov, 2);
  if (n < 0) die("writev");
  if (static_cast<size_t>(n) == total) return;
  // The socket took part of it: finish with plain writes.
  size_t done = static_cast<size_t>(n);
  if (done < sizeof len) {
    writeAll(fd, reinterpret_cast<const char*>(&len) + done, sizeof len - done);
    done = sizeof len;
  }
  writeAll(fd, payload.data() + (done - sizeof len), total - done);
}

void flush(int fd, std::vector<char>& out) {
  if (out.empty()) return;
  writeAll(fd, out.data(), out.size());
  out.clear();
}

pid_t forkChild(int fds[2], bool& isChild) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) die("socketpair");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  isChild = pid == 0;
  close(isChild ? fds[0] : fds[1]);
  return pid;
}

void reap(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::fprintf(stderr, "uds_bench: receiver failed\n");
    std::exit(1);
  }
}

// Receiver: reads 1 MiB at a time, walks the length prefixes, acks once N frames arrived.
void receiveFrames(int fd, long count) {
  std::vector<char> buf(1 << 20);
  long frames = 0;
  uint64_t need = 0;  // payload bytes left in the current frame
  char hdr[4];
  size_t hdrHave = 0;
  while (frames < count) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) die("receiver read");
    size_t off = 0;
    while (off < static_cast<size_t>(n)) {
      if (need > 0) {
        const size_t take = std::min<uint64_t>(need, static_cast<size_t>(n) - off);
        need -= take;
        off += take;
        if (need == 0) ++frames;
        continue;
      }
      hdr[hdrHave++] = buf[off++];
      if (hdrHave < 4) continue;
      uint32_t len;
      std::memcpy(&len, hdr, 4);
      hdrHave = 0;
      need = len;
      if (need == 0) ++frames;
    }
  }
  writeAll(fd, "!", 1);
}

int throughput(const Args& a) {
  if (a.count <= 0 || a.size <= 0) return usage();
  int fds[2];
  bool child = false;
  const pid_t pid = forkChild(fds, child);
  if (child) {
    receiveFrames(fds[1], a.count);
    std::_Exit(0);
  }
  const int fd = fds[0];
  std::vector<char> payload(static_cast<size_t>(a.size), 'x');
  std::vector<char> out;
  out.reserve(static_cast<size_t>(std::max(a.batch, 1L)));
  const uint64_t t0 = nowNs();
  for (long i = 0; i < a.count; ++i) {
    const size_t frame = 4 + payload.size();
    if (a.batch <= 0 || frame > static_cast<size_t>(a.batch)) {
      flush(fd, out);
      writeFrame(fd, payload);
      continue;
    }
    if (out.size() + frame > static_cast<size_t>(a.batch)) flush(fd, out);
    const auto len = static_cast<uint32_t>(payload.size());
    out.insert(out.end(), reinterpret_cast<const char*>(&len),
               reinterpret_cast<const char*>(&len) + 4);
    out.insert(out.end(), payload.begin(), payload.end());
  }
  flush(fd, out);
  char ack;
  readAll(fd, &ack, 1);
  const double secs = static_cast<double>(nowNs() - t0) / 1e9;
  reap(pid);
  std::printf(
      "{\"size\": %ld, \"count\": %ld, \"batch\": %ld, \"seconds\": %.6f, \"msgs_per_sec\": "
      "%.1f, \"mb_per_sec\": %.2f}\n",
      a.size, a.count, a.batch, secs, static_cast<double>(a.count) / secs,
      static_cast<double>(a.count) * static_cast<double>(a.size) / 1e6 / secs);
  return 0;
}

void echoFrames(int fd, long total, size_t size) {
  std::vector<char> buf(4 + size);
  for (long i = 0; i < total; ++i) {
    readAll(fd, buf.data(), buf.size());
    writeAll(fd, buf.data(), buf.size());
  }
}

double percentile(const std::vector<double>& sorted, double p) {
  const auto i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

int latency(const Args& a) {
  if (a.count <= 0 || a.size <= 0) return usage();
  int fds[2];
  bool child = false;
  const pid_t pid = forkChild(fds, child);
  const long total = a.warmup + a.count;
  if (child) {
    echoFrames(fds[1], total, static_cast<size_t>(a.size));
    std::_Exit(0);
  }
  const int fd = fds[0];
  std::vector<char> payload(static_cast<size_t>(a.size), 'x');
  std::vector<char> back(4 + payload.size());
  std::vector<double> us;
  us.reserve(static_cast<size_t>(a.count));
  for (long i = 0; i < total; ++i) {
    const uint64_t t0 = nowNs();
    writeFrame(fd, payload);
    readAll(fd, back.data(), back.size());
    if (i >= a.warmup) us.push_back(static_cast<double>(nowNs() - t0) / 1e3);
  }
  reap(pid);
  double sum = 0;
  for (double v : us)
    sum += v;
  std::sort(us.begin(), us.end());
  std::printf(
      "{\"size\": %ld, \"count\": %ld, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, "
      "\"mean_us\": %.2f, \"max_us\": %.2f}\n",
      a.size, a.count, percentile(us, 50), percentile(us, 99), percentile(us, 99.9),
      sum / static_cast<double>(us.size()), us.back());
  return 0;
}

// Child of `lines`: socket -> stdout until N newlines went through.
void linesOut(int fd, long count) {
  std::vector<char> buf(1 << 16);
  long lines = 0;
  while (lines < count) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n <= 0) die("lines: read");
    size_t take = static_cast<size_t>(n);
    for (size_t i = 0; i < take; ++i)
      if (buf[i] == '\n' && ++lines == count) take = i + 1;
    writeAll(STDOUT_FILENO, buf.data(), take);
  }
}

void linesIn(int fd, bool perLine) {
  if (perLine) {  // one write per line, as a naive line-at-a-time sender would
    char* line = nullptr;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0)
      writeAll(fd, line, static_cast<size_t>(n));
    std::free(line);
    return;
  }
  std::vector<char> buf(1 << 16);
  ssize_t n;
  while ((n = read(STDIN_FILENO, buf.data(), buf.size())) > 0)
    writeAll(fd, buf.data(), static_cast<size_t>(n));
}

int lines(const Args& a) {
  if (a.count <= 0) return usage();
  int fds[2];
  bool child = false;
  const pid_t pid = forkChild(fds, child);
  if (child) {
    linesOut(fds[1], a.count);
    std::_Exit(0);
  }
  linesIn(fds[0], a.perLine);
  reap(pid);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string_view cmd = argv[1];
  const Args a = parseArgs(argc, argv);
  if (cmd == "throughput") return throughput(a);
  if (cmd == "latency") return latency(a);
  if (cmd == "lines") return lines(a);
  return usage();
}
