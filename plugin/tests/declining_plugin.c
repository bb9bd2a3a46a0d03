/* A test plugin that claims fp16 and declines (ATTN_ERR_UNSUPPORTED, naming
 * the tensor and element) any input whose magnitude exceeds LIMIT; otherwise
 * it computes attention like the example plugin. Built twice: LIMIT=65504
 * declines only what fp16 cannot hold (accepted by the harness), LIMIT=1
 * declines ordinary cases inside fp16's range (a finding). */
#include <math.h>
#include <stdio.h>

#include "attention_c.h"
#include "attn_plugin.h"

static int declines(const char *name, const float *x, int64_t n, char *error, size_t error_size) {
  for (int64_t i = 0; i < n; ++i)
    if (fabsf(x[i]) > (float)LIMIT) {
      snprintf(error, error_size, "%s element %lld = %g is beyond what this plugin holds (%g)", name,
               (long long)i, (double)x[i], (double)LIMIT);
      return 1;
    }
  return 0;
}

static int forward_declining(const attn_problem *p, const float *q, const float *k, const float *v,
                             float *out, float *weights, char *error, size_t error_size) {
  const int64_t slices = p->batch * p->heads;
  if (declines("Q", q, slices * p->n_q * p->d_k, error, error_size) ||
      declines("K", k, slices * p->n_k * p->d_k, error, error_size) ||
      declines("V", v, slices * p->n_k * p->d_v, error, error_size))
    return ATTN_ERR_UNSUPPORTED;
  return attention_c_forward(p, q, k, v, out, weights, error, error_size);
}

static const attn_plugin declining_plugin = {
    ATTN_PLUGIN_ABI_VERSION,
    "declining",
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT | ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT |
        ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK | ATTN_FEATURE_EMPTY_ROW_REJECT |
        ATTN_FEATURE_EMPTY_ROW_ZERO,
    ATTN_PRECISION_FP16,
    forward_declining,
};

ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void) { return &declining_plugin; }
