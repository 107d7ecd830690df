// The C library's socket calls, resolved in libc.so.6 itself (see rsocket_sys.h).
#include "rsocket_sys.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace softrdma::sys {
namespace {

struct Libc {
  decltype(&::socket) socket;
  decltype(&::bind) bind;
  decltype(&::listen) listen;
  decltype(&::accept4) accept4;
  decltype(&::connect) connect;
  decltype(&::shutdown) shutdown;
  decltype(&::close) close;
  decltype(&::read) read;
  decltype(&::write) write;
  decltype(&::sendmsg) sendmsg;
  decltype(&::recvmsg) recvmsg;
  decltype(&::poll) poll;
  decltype(&::getsockname) getsockname;
  decltype(&::getpeername) getpeername;
  decltype(&::setsockopt) setsockopt;
  decltype(&::getsockopt) getsockopt;
};

template <typename F>
void resolve(void* libc, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(libc, name));
  if (out == nullptr) {
    fprintf(stderr, "softrdma: libc.so.6 has no %s\n", name);
    abort();
  }
}

Libc load() {
  // libc.so.6 is loaded in every process softrdma runs in; RTLD_NOLOAD only takes a handle.
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  if (libc == nullptr) {
    fprintf(stderr, "softrdma: cannot find libc.so.6: %s\n", dlerror());
    abort();
  }
  Libc l{};
  resolve(libc, "socket", l.socket);
  resolve(libc, "bind", l.bind);
  resolve(libc, "listen", l.listen);
  resolve(libc, "accept4", l.accept4);
  resolve(libc, "connect", l.connect);
  resolve(libc, "shutdown", l.shutdown);
  resolve(libc, "close", l.close);
  resolve(libc, "read", l.read);
  resolve(libc, "write", l.write);
  resolve(libc, "sendmsg", l.sendmsg);
  resolve(libc, "recvmsg", l.recvmsg);
  resolve(libc, "poll", l.poll);
  resolve(libc, "getsockname", l.getsockname);
  resolve(libc, "getpeername", l.getpeername);
  resolve(libc, "setsockopt", l.setsockopt);
  resolve(libc, "getsockopt", l.getsockopt);
  return l;
}

const Libc& libc() {
  static const Libc l = load();
  return l;
}

}  // namespace

int socket(int d, int t, int p) {
  return libc().socket(d, t, p);
}
int bind(int fd, const sockaddr* a, socklen_t l) {
  return libc().bind(fd, a, l);
}
int listen(int fd, int b) {
  return libc().listen(fd, b);
}
int accept4(int fd, sockaddr* a, socklen_t* l, int f) {
  return libc().accept4(fd, a, l, f);
}
int connect(int fd, const sockaddr* a, socklen_t l) {
  return libc().connect(fd, a, l);
}
int shutdown(int fd, int how) {
  return libc().shutdown(fd, how);
}
int close(int fd) {
  return libc().close(fd);
}
ssize_t read(int fd, void* b, size_t n) {
  return libc().read(fd, b, n);
}
ssize_t write(int fd, const void* b, size_t n) {
  return libc().write(fd, b, n);
}
ssize_t sendmsg(int fd, const msghdr* m, int f) {
  return libc().sendmsg(fd, m, f);
}
ssize_t recvmsg(int fd, msghdr* m, int f) {
  return libc().recvmsg(fd, m, f);
}
int poll(pollfd* fds, nfds_t n, int t) {
  return libc().poll(fds, n, t);
}
int getsockname(int fd, sockaddr* a, socklen_t* l) {
  return libc().getsockname(fd, a, l);
}
int getpeername(int fd, sockaddr* a, socklen_t* l) {
  return libc().getpeername(fd, a, l);
}
int setsockopt(int fd, int lv, int n, const void* v, socklen_t l) {
  return libc().setsockopt(fd, lv, n, v, l);
}
int getsockopt(int fd, int lv, int n, void* v, socklen_t* l) {
  return libc().getsockopt(fd, lv, n, v, l);
}

}  // namespace softrdma::sys
