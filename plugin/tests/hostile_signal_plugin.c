/* Test plugins that end their process from inside forward, or tamper with the
 * worker's control channel, one per MODE given at compile time. Each computes
 * correctly first, so the only finding is the misbehaviour. SIG names the
 * signal for the raise and kill modes.
 *
 * Every mode misbehaves on every call, except MODE_RAISE_LARGE (only for
 * n_k > 5) and MODE_PID_OR_MISBEHAVE (as q[0] says). */
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attention_c.h"
#include "attn_plugin.h"

#define MODE_RAISE 1            /* raise(SIG) */
#define MODE_KILL 2             /* kill(getpid(), SIG) */
#define MODE_REAL_SIGFPE 3      /* integer division by zero */
#define MODE_REAL_SIGILL 4      /* an undefined instruction */
#define MODE_ABORT 5            /* abort() */
#define MODE_EXIT 6             /* exit(3) */
#define MODE__EXIT 7            /* _exit(0) */
#define MODE_CLOSE_CHANNEL 8    /* closes every socket it can find, then returns */
#define MODE_WRITE_CHANNEL 9    /* writes to every socket it can find, then returns */
#define MODE_CLOSE_AND_HANG 10  /* closes every socket, then never returns */
#define MODE_RAISE_LARGE 11     /* raise(SIGSEGV) when n_k > 5 */
#define MODE_PID_OR_MISBEHAVE 12 /* out = its process id; by q[0]: -1 raise(SIGSEGV),
                                   -2 hang, -3 write past out */
#define MODE_REPORTS_TIME 13    /* exports attn_plugin_compute_seconds: 0.25 */
#define MODE_REPORTS_BAD_TIME 14 /* exports attn_plugin_compute_seconds: -1 */
#define MODE_TAKES_THREADS 15   /* exports attn_plugin_set_threads; reports the count it was
                                   given as its compute time (0 before any) */

#ifndef MODE
#error "define MODE to one of the MODE_* values"
#endif
#ifndef SIG
#define SIG SIGSEGV
#endif

#if MODE == MODE_CLOSE_CHANNEL || MODE == MODE_WRITE_CHANNEL || MODE == MODE_CLOSE_AND_HANG
static void for_each_socket(int close_it) {
  int fd;
  for (fd = 3; fd < 1024; ++fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (close_it) {
      close(fd);
    } else {
      static const char garbage[] = "not a reply";
      ssize_t ignored = write(fd, garbage, sizeof garbage);
      (void)ignored;
    }
  }
}
#endif

#if MODE == MODE_REAL_SIGFPE
static volatile int zero = 0, seven = 7; /* volatile: a real idiv, not folded */
#endif

static int misbehave(const attn_problem *p, const float *q) {
#if MODE == MODE_TAKES_THREADS
  (void)q;
  (void)p;
  return 0;
#elif MODE == MODE_RAISE_LARGE
  (void)q;
  return p->n_k > 5;
#elif MODE == MODE_PID_OR_MISBEHAVE
  (void)p;
  return q[0] < 0;
#else
  (void)q;
  (void)p;
  return 1;
#endif
}

static int signal_forward(const attn_problem *p, const float *q, const float *k, const float *v,
                          float *out, float *weights, char *error, size_t error_size) {
  int rc = attention_c_forward(p, q, k, v, out, weights, error, error_size);
  if (rc != ATTN_OK) return rc;
#if MODE == MODE_PID_OR_MISBEHAVE
  {
    const int64_t n = p->batch * p->heads * p->n_q * p->d_v;
    int64_t i;
    for (i = 0; i < n; ++i) out[i] = (float)getpid();
    if (q[0] == -2.0f)
      for (;;) pause();
    if (q[0] == -3.0f) out[n] = 0.0f;
  }
#endif
  if (!misbehave(p, q)) return ATTN_OK;
#if MODE == MODE_RAISE || MODE == MODE_RAISE_LARGE
  raise(SIG);
#elif MODE == MODE_PID_OR_MISBEHAVE
  if (q[0] == -1.0f) raise(SIG);
#elif MODE == MODE_KILL
  kill(getpid(), SIG);
#elif MODE == MODE_REAL_SIGFPE
  out[0] = (float)(seven / zero);
#elif MODE == MODE_REAL_SIGILL
  __builtin_trap();
#elif MODE == MODE_ABORT
  abort();
#elif MODE == MODE_EXIT
  exit(3);
#elif MODE == MODE__EXIT
  _exit(0);
#elif MODE == MODE_CLOSE_CHANNEL
  for_each_socket(1);
#elif MODE == MODE_WRITE_CHANNEL
  for_each_socket(0);
#elif MODE == MODE_CLOSE_AND_HANG
  for_each_socket(1);
  for (;;) pause();
#endif
  return ATTN_OK;
}

static const attn_plugin signal_plugin = {
    ATTN_PLUGIN_ABI_VERSION,
    "signal-c",
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT |
        ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT | ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK |
        ATTN_FEATURE_EMPTY_ROW_REJECT | ATTN_FEATURE_EMPTY_ROW_ZERO | ATTN_FEATURE_WEIGHTS,
    ATTN_PRECISION_FP32,
    signal_forward,
};

ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void) { return &signal_plugin; }

#if MODE == MODE_REPORTS_TIME || MODE == MODE_REPORTS_BAD_TIME
ATTN_PLUGIN_EXPORT double attn_plugin_compute_seconds(void);
double attn_plugin_compute_seconds(void) { return MODE == MODE_REPORTS_TIME ? 0.25 : -1.0; }
#elif MODE == MODE_TAKES_THREADS
static int threads_given = 0;
ATTN_PLUGIN_EXPORT void attn_plugin_set_threads(int threads);
void attn_plugin_set_threads(int threads) { threads_given = threads; }
ATTN_PLUGIN_EXPORT double attn_plugin_compute_seconds(void);
double attn_plugin_compute_seconds(void) { return (double)threads_given; }
#endif
