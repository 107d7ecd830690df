/* A stand-in for a slow name service (LDAP, sssd) for the reload tests:
 * preloaded into rdmamsgd, getpwnam_r and getgrnam_r take SLOW_NAMES_MS
 * (default 3000) milliseconds for names that start with "slow-" and then
 * answer with the caller's own uid and gid. Other names go to the C
 * library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int slow(const char* name) {
  if (strncmp(name, "slow-", 5) != 0) return 0;
  const char* ms = getenv("SLOW_NAMES_MS");
  long wait = ms != NULL ? atol(ms) : 3000;
  struct timespec t = {wait / 1000, (wait % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
  return 1;
}

int getpwnam_r(const char* name, struct passwd* pw, char* buf, size_t len, struct passwd** out) {
  if (!slow(name)) {
    int (*real)(const char*, struct passwd*, char*, size_t, struct passwd**) = (int (*)(
        const char*, struct passwd*, char*, size_t, struct passwd**))dlsym(RTLD_NEXT, "getpwnam_r");
    return real(name, pw, buf, len, out);
  }
  return getpwuid_r(getuid(), pw, buf, len, out);
}

int getgrnam_r(const char* name, struct group* gr, char* buf, size_t len, struct group** out) {
  if (!slow(name)) {
    int (*real)(const char*, struct group*, char*, size_t, struct group**) = (int (*)(
        const char*, struct group*, char*, size_t, struct group**))dlsym(RTLD_NEXT, "getgrnam_r");
    return real(name, gr, buf, len, out);
  }
  return getgrgid_r(getgid(), gr, buf, len, out);
}
