/* attn_plugin.h — the C ABI through which attncheck checks an external
 * scaled dot-product attention implementation. Plain C99; no other header of
 * attncheck is needed to build a plugin.
 *
 * A plugin is a shared library that exports one function,
 *
 *     const attn_plugin *attn_plugin_init(void);
 *
 * returning a pointer to a static description: the ABI version it was built
 * against (always ATTN_PLUGIN_ABI_VERSION), its name, the features it
 * supports, the accuracy class it claims and its forward function. attncheck
 * refuses a plugin whose abi_version differs from its own and prints both
 * numbers. attn_plugin_init must be cheap and side-effect free: it runs once
 * in a probe child (a crash there refuses the plugin) and then in the
 * attncheck process itself. Forward calls run in a worker child process
 * that serves every call of a run, so a thread pool or a costly first call
 * is paid once; the worker is replaced after a crash, a timeout or a stray
 * write. forward may keep caches across calls, but each answer must follow
 * from that call's inputs alone.
 *
 * Computation (one batch element b, one head h; see docs/semantics.md):
 *     S = Q Kᵀ · scale                       n_q × n_k
 *     L = (S + M) / temperature              M: 0 where allowed, −∞ where masked
 *     A = row-wise softmax of L              (stabilised by the row max)
 *     O = A V                                n_q × d_v
 *
 * Shapes and layout. Every tensor is contiguous, row-major float32:
 *     q        [batch][heads][n_q][d_k]
 *     k        [batch][heads][n_k][d_k]
 *     v        [batch][heads][n_k][d_v]
 *     out      [batch][heads][n_q][d_v]
 *     weights  [batch][heads][n_q][n_k]   NULL unless the plugin declares
 *                                         ATTN_FEATURE_WEIGHTS and A is wanted
 *   element (b, h, i, c) of q is q[((b * heads + h) * n_q + i) * d_k + c].
 *
 * Masks (all combine: a key is readable only when every rule in force allows it):
 *   mask_kind ATTN_MASK_CAUSAL_TOP_LEFT      key j masked for query i when j > i
 *   mask_kind ATTN_MASK_CAUSAL_BOTTOM_RIGHT  masked when j > i + (n_k − n_q)
 *   mask_kind ATTN_MASK_EXPLICIT             mask is uint8 [mask_batch][mask_heads][n_q][n_k],
 *                                            nonzero = allowed; mask_batch is 1 or batch,
 *                                            mask_heads is 1 or heads, and a leading 1
 *                                            broadcasts: element (b, h, i, j) is
 *                                            mask[((mb * mask_heads + mh) * n_q + i) * n_k + j]
 *                                            with mb = mask_batch == 1 ? 0 : b and
 *                                            mh = mask_heads == 1 ? 0 : h.
 *                                            mask is NULL for every other kind.
 *   key_lengths   NULL, or int64_t [batch]: keys j >= key_lengths[b] are masked
 *                 for every query of batch element b, whatever mask_kind is.
 *
 * Empty rows (every key of a query masked): ATTN_EMPTY_ROW_REJECT asks the
 * plugin to return ATTN_ERR_INVALID naming the first empty (b, h, i) before
 * writing anything; ATTN_EMPTY_ROW_ZERO asks for zeros in that row of out
 * (and of weights).
 *
 * Bad input (a non-finite value in q, k or v; scale or temperature not finite
 * and positive; a key length outside [0, n_k]) must be answered with
 * ATTN_ERR_INVALID and a message naming the tensor and index written to
 * `error` (at most error_size bytes including the terminating NUL). On
 * ATTN_OK every element of out (and of weights when asked) must be written.
 *
 * Inputs are read-only: attncheck maps q, k, v, mask, key_lengths and the
 * problem itself read-only in the child process, surrounds out and weights
 * with guard regions and fills them with a NaN pattern before the call, so a
 * write to an input, a write out of bounds or an unwritten output element is
 * reported as a finding.
 */
#ifndef ATTN_PLUGIN_H
#define ATTN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_PLUGIN_ABI_VERSION 1

#if defined(_WIN32)
#define ATTN_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ATTN_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* attn_problem.mask_kind */
#define ATTN_MASK_NONE 0
#define ATTN_MASK_CAUSAL_TOP_LEFT 1
#define ATTN_MASK_CAUSAL_BOTTOM_RIGHT 2
#define ATTN_MASK_EXPLICIT 3

/* attn_problem.empty_row_policy */
#define ATTN_EMPTY_ROW_REJECT 0
#define ATTN_EMPTY_ROW_ZERO 1

/* attn_plugin.precision: the accuracy class the plugin claims */
#define ATTN_PRECISION_FP32 0
#define ATTN_PRECISION_BF16 1
#define ATTN_PRECISION_FP16 2

/* return codes of forward */
#define ATTN_OK 0
#define ATTN_ERR_INVALID 1     /* input rejected; message written to error */
/* ATTN_ERR_UNSUPPORTED: declines a case beyond the claimed precision class
   (message written to error). Problems outside attn_plugin.features never
   reach forward; a declined case is accepted (counted as declined) only when
   the case is out of the class's range, and is a failure otherwise. */
#define ATTN_ERR_UNSUPPORTED 2
#define ATTN_ERR_INTERNAL 3    /* anything else; message written to error */

/* attn_plugin.features: only problems within these are generated */
#define ATTN_FEATURE_CROSS ((uint32_t)1 << 0)               /* n_q != n_k */
#define ATTN_FEATURE_DV_NE_DK ((uint32_t)1 << 1)            /* d_v != d_k */
#define ATTN_FEATURE_BATCH_HEADS ((uint32_t)1 << 2)         /* batch or heads > 1 */
#define ATTN_FEATURE_SCALE ((uint32_t)1 << 3)               /* scale other than 1/sqrt(d_k) */
#define ATTN_FEATURE_TEMPERATURE ((uint32_t)1 << 4)         /* temperature != 1 */
#define ATTN_FEATURE_CAUSAL_TOP_LEFT ((uint32_t)1 << 5)
#define ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT ((uint32_t)1 << 6)
#define ATTN_FEATURE_KEY_PADDING ((uint32_t)1 << 7)         /* key_lengths */
#define ATTN_FEATURE_EXPLICIT_MASK ((uint32_t)1 << 8)
#define ATTN_FEATURE_EMPTY_ROW_REJECT ((uint32_t)1 << 9)
#define ATTN_FEATURE_EMPTY_ROW_ZERO ((uint32_t)1 << 10)
#define ATTN_FEATURE_WEIGHTS ((uint32_t)1 << 11)            /* can return A */

typedef struct attn_problem {
  uint32_t abi_version; /* ATTN_PLUGIN_ABI_VERSION of attncheck */
  int64_t batch, heads, n_q, n_k, d_k, d_v;
  double scale;         /* always set: 1/sqrt(d_k) unless the problem gives one */
  double temperature;   /* tau; logits are (S + M) / tau */
  int32_t mask_kind;    /* ATTN_MASK_* */
  const uint8_t *mask;  /* [mask_batch][mask_heads][n_q][n_k] or NULL */
  int64_t mask_batch, mask_heads;
  const int64_t *key_lengths; /* [batch] or NULL */
  int32_t empty_row_policy;   /* ATTN_EMPTY_ROW_* */
} attn_problem;

typedef struct attn_plugin {
  uint32_t abi_version; /* ATTN_PLUGIN_ABI_VERSION the plugin was built against */
  const char *name;
  uint32_t features;    /* ATTN_FEATURE_* bits */
  int32_t precision;    /* ATTN_PRECISION_* */
  int (*forward)(const attn_problem *problem, const float *q, const float *k, const float *v,
                 float *out, float *weights, char *error, size_t error_size);
} attn_plugin;

/* The one entry point a plugin must export. */
ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void);

/* Optional: the compute time of the last forward call, in seconds (finite,
 * >= 0), for a plugin that wants to leave something out of it (a one-time
 * set-up inside forward, layout conversions). attncheck calls it in the same
 * process, right after forward returned ATTN_OK; any other value is reported
 * as a protocol fault. Without it, attncheck takes the wall time of the
 * forward call measured around it in the child. Looked up with dlsym, so
 * plugins that do not export it are unaffected (no ABI version change). */
typedef double (*attn_plugin_compute_seconds_fn)(void);
#define ATTN_PLUGIN_COMPUTE_SECONDS_SYMBOL "attn_plugin_compute_seconds"

/* Optional: the thread count the caller asked for (bench --threads, verify
 * --threads; at least 1), passed in the worker right before each forward
 * call, so that a plugin with a thread pool of its own compares like with
 * like. A plugin that exports it is taken to honour it: the
 * thread_determinism property then checks that its results are the same
 * bits for every thread count. Looked up with dlsym, like
 * attn_plugin_compute_seconds. */
typedef void (*attn_plugin_set_threads_fn)(int threads);
#define ATTN_PLUGIN_SET_THREADS_SYMBOL "attn_plugin_set_threads"

#ifdef __cplusplus
}
#endif

#endif /* ATTN_PLUGIN_H */
