/* Test plugins that misbehave, one per HOSTILE_* value given at compile time.
 * Each computes correctly and then does one wrong thing, so attncheck must
 * report exactly that finding. */
#include <stdint.h>
#include <unistd.h>

#include "attention_c.h"
#include "attn_plugin.h"

#define HOSTILE_SEGFAULT 1
#define HOSTILE_HANG 2
#define HOSTILE_WRITE_PAST_OUTPUT 3
#define HOSTILE_WRITE_INPUT 4
#define HOSTILE_UNWRITTEN_OUTPUT 5
#define HOSTILE_WRONG_ABI 6
#define HOSTILE_WRITE_BEFORE_OUTPUT 7
#define HOSTILE_INIT_CRASH 8

#ifndef HOSTILE
#error "define HOSTILE to one of the HOSTILE_* values"
#endif

static int hostile_forward(const attn_problem *p, const float *q, const float *k, const float *v,
                           float *out, float *weights, char *error, size_t error_size) {
  const int64_t out_size = p->batch * p->heads * p->n_q * p->d_v;
  int rc;
#if HOSTILE == HOSTILE_UNWRITTEN_OUTPUT
  /* claims success without computing anything */
  (void)q, (void)k, (void)v, (void)out, (void)weights, (void)error, (void)error_size;
  (void)out_size;
  return ATTN_OK;
#endif
  rc = attention_c_forward(p, q, k, v, out, weights, error, error_size);
  if (rc != ATTN_OK) return rc;
#if HOSTILE == HOSTILE_SEGFAULT
  {
    volatile int *volatile nowhere = NULL; /* volatile: the store is not optimised away */
    *nowhere = 1;
  }
#elif HOSTILE == HOSTILE_HANG
  for (;;) pause();
#elif HOSTILE == HOSTILE_WRITE_PAST_OUTPUT
  out[out_size] = 0.0f; /* one element past the end */
#elif HOSTILE == HOSTILE_WRITE_BEFORE_OUTPUT
  out[-1] = 0.0f;
#elif HOSTILE == HOSTILE_WRITE_INPUT
  ((float *)k)[0] = 0.0f; /* scribbles on its input */
#endif
  (void)out_size;
  return ATTN_OK;
}

static const attn_plugin hostile_plugin = {
#if HOSTILE == HOSTILE_WRONG_ABI
    ATTN_PLUGIN_ABI_VERSION + 1,
#else
    ATTN_PLUGIN_ABI_VERSION,
#endif
    "hostile-c",
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT |
        ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT | ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK |
        ATTN_FEATURE_EMPTY_ROW_REJECT | ATTN_FEATURE_EMPTY_ROW_ZERO,
    ATTN_PRECISION_FP32,
    hostile_forward,
};

ATTN_PLUGIN_EXPORT const attn_plugin *attn_plugin_init(void) {
#if HOSTILE == HOSTILE_INIT_CRASH
  volatile int *volatile nowhere = NULL;
  *nowhere = 1;
#endif
  return &hostile_plugin;
}
