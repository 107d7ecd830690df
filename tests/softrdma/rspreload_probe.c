// A plain TCP echo program (ordinary socket calls only), run with librspreload preloaded
// after libsoftrdma: librspreload turns its sockets into rsockets, which softrdma provides.
//
//   rspreload_probe server PORT   accepts one connection on 127.0.0.1:PORT, echoes until EOF
//   rspreload_probe client PORT   sends 200 messages, checks each echo, then shuts down
//
// Each side prints "ok rsocket" at the end when its socket was an rsocket (SOL_RDMA options
// answer) and everything went as expected; anything else exits 1.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMessages = 200, kSize = 1500, kTimeoutMs = 10000 };

static int die(const char* what) {
  fprintf(stderr, "rspreload_probe: %s: %s\n", what, strerror(errno));
  exit(1);
}

static int isRsocket(int fd) {
  int v = 0;
  socklen_t len = sizeof v;
  return getsockopt(fd, SOL_RDMA, RDMA_INLINE, &v, &len) == 0;
}

static void readAll(int fd, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, kTimeoutMs) != 1) die("poll");
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) die(r == 0 ? "unexpected end of stream" : "read");
    got += (size_t)r;
  }
}

static void writeAll(int fd, const char* buf, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t w = send(fd, buf + put, n - put, 0);
    if (w <= 0) die("send");
    put += (size_t)w;
  }
}

static int server(struct sockaddr_in* a) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (l < 0) die("socket");
  if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("setsockopt");
  if (bind(l, (struct sockaddr*)a, sizeof *a) != 0) die("bind");
  if (listen(l, 4) != 0) die("listen");
  struct pollfd p = {l, POLLIN, 0};
  if (poll(&p, 1, kTimeoutMs) != 1) die("poll for a connection");
  int s = accept(l, NULL, NULL);
  if (s < 0) die("accept");
  char buf[kSize];
  for (;;) {
    struct pollfd q = {s, POLLIN, 0};
    if (poll(&q, 1, kTimeoutMs) != 1) die("poll");
    ssize_t r = recv(s, buf, sizeof buf, 0);
    if (r < 0) die("recv");
    if (r == 0) break;
    writeAll(s, buf, (size_t)r);
  }
  int ok = isRsocket(s) && isRsocket(l);
  close(s);
  close(l);
  return ok;
}

static int client(struct sockaddr_in* a) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) die("socket");
  if (connect(s, (struct sockaddr*)a, sizeof *a) != 0) die("connect");
  char out[kSize], in[kSize];
  for (int m = 0; m < kMessages; m++) {
    for (int i = 0; i < kSize; i++)
      out[i] = (char)(m * 31 + i);
    fd_set w;
    FD_ZERO(&w);
    FD_SET(s, &w);
    struct timeval tv = {kTimeoutMs / 1000, 0};
    if (select(s + 1, NULL, &w, NULL, &tv) != 1) die("select");
    writeAll(s, out, sizeof out);
    readAll(s, in, sizeof in);
    if (memcmp(in, out, sizeof in) != 0) {
      fprintf(stderr, "rspreload_probe: message %d came back different\n", m);
      exit(1);
    }
  }
  if (shutdown(s, SHUT_WR) != 0) die("shutdown");
  ssize_t r = read(s, in, sizeof in);
  if (r != 0) die("end of stream");
  int ok = isRsocket(s);
  close(s);
  return ok;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: rspreload_probe server|client PORT\n");
    return 2;
  }
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)atoi(argv[2]));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = strcmp(argv[1], "server") == 0 ? server(&a) : client(&a);
  if (!ok) {
    fprintf(stderr, "rspreload_probe: the socket was not an rsocket\n");
    return 1;
  }
  printf("ok rsocket\n");
  return 0;
}
