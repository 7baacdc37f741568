/* Counts the bytes copied by memcpy/memmove per thread of tower_vs_balance: its client
 * runtime's threads (vs-client), its server runtime's (vs-server), the rest. Loaded with
 * LD_PRELOAD, it prints the totals at exit; with MEMHIST=FILE it also writes the client
 * threads' copies by size ("size count" lines). Copies per call, as callgrind's instruction
 * counts do not show them (a large copy is a few instructions):
 *
 *   cc -O2 -shared -fPIC -o /tmp/memcount.so tower/examples/memcount.c -ldl
 *   cargo build --release -p routechain-tower --example tower_vs_balance
 *   for side in balanced full empty; do for n in 0 20000; do
 *     LD_PRELOAD=/tmp/memcount.so target/release/examples/tower_vs_balance \
 *       --profile $side --calls $n 2>&1 >/dev/null | grep MEMCOUNT
 *   done; done
 *
 * bytes per call = (client bytes at N - client bytes at 0) / N. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZES 65536
static unsigned long long bytes[3], calls[3], by_size[SIZES];
static void *(*real_memcpy)(void *, const void *, size_t);
static void *(*real_memmove)(void *, const void *, size_t);
static __thread int slot = -1;
static __thread int checks;

/* 0 client, 1 server, 2 other; a thread is named after it starts, so an unnamed one is
 * asked again for a while. */
static int which(void) {
  if (slot < 0 || (slot == 2 && checks < 20000)) {
    char name[32] = {0};
    checks++;
    pthread_getname_np(pthread_self(), name, sizeof name);
    slot = !strncmp(name, "vs-client", 9) ? 0 : !strncmp(name, "vs-server", 9) ? 1 : 2;
  }
  return slot;
}

/* Used only while dlsym resolves the real functions. */
static void *plain(void *d, const void *s, size_t n) {
  unsigned char *dd = d;
  const unsigned char *ss = s;
  if (dd < ss)
    for (size_t i = 0; i < n; i++) dd[i] = ss[i];
  else
    for (size_t i = n; i > 0; i--) dd[i - 1] = ss[i - 1];
  return d;
}

static void count(size_t n) {
  int w = which();
  __atomic_add_fetch(&bytes[w], n, __ATOMIC_RELAXED);
  __atomic_add_fetch(&calls[w], 1, __ATOMIC_RELAXED);
  if (w == 0) __atomic_add_fetch(&by_size[n < SIZES ? n : SIZES - 1], 1, __ATOMIC_RELAXED);
}

void *memcpy(void *d, const void *s, size_t n) {
  if (!real_memcpy) {
    real_memcpy = plain;
    void *p = dlsym(RTLD_NEXT, "memcpy");
    if (p) real_memcpy = p;
  }
  count(n);
  return real_memcpy(d, s, n);
}

void *memmove(void *d, const void *s, size_t n) {
  if (!real_memmove) {
    real_memmove = plain;
    void *p = dlsym(RTLD_NEXT, "memmove");
    if (p) real_memmove = p;
  }
  count(n);
  return real_memmove(d, s, n);
}

__attribute__((destructor)) static void report(void) {
  const char *out = getenv("MEMHIST");
  if (out) {
    FILE *f = fopen(out, "w");
    if (f) {
      for (int i = 0; i < SIZES; i++)
        if (by_size[i]) fprintf(f, "%d %llu\n", i, by_size[i]);
      fclose(f);
    }
  }
  fprintf(stderr,
          "MEMCOUNT client %llu bytes %llu calls; server %llu bytes %llu calls; "
          "other %llu bytes %llu calls\n",
          bytes[0], calls[0], bytes[1], calls[1], bytes[2], calls[2]);
}
