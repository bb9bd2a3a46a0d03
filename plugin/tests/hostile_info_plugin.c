/* Test plugins whose attn_plugin description itself is broken: built once per
 * BROKEN value (plugin/tests/hostile_plugin_info_test.cpp). 1: name is NULL,
 * 2: name is "", 3: forward is NULL, 4: feature bits beyond the known twelve. */
#include <stddef.h>

#include "attn_plugin.h"

#if BROKEN != 3
static int forward_nothing(const attn_problem *problem, const float *q, const float *k,
                           const float *v, float *out, float *weights, char *error,
                           size_t error_size) {
  (void)problem, (void)q, (void)k, (void)v, (void)out, (void)weights, (void)error, (void)error_size;
  return ATTN_OK;
}
#endif

static const attn_plugin broken_plugin = {
    ATTN_PLUGIN_ABI_VERSION,
#if BROKEN == 1
    NULL,
#elif BROKEN == 2
    "",
#else
    "broken",
#endif
#if BROKEN == 4
    0xFFFFFFFFu,
#else
    ATTN_FEATURE_CROSS,
#endif
    ATTN_PRECISION_FP32,
#if BROKEN == 3
    NULL,
#else
    forward_nothing,
#endif
};

ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void) { return &broken_plugin; }
