/* A straightforward attention in C99 shared by the example plugin and the
 * test plugins: validates its input as attn_plugin.h asks, then computes
 * O = softmax((Q Kᵀ · scale + M) / τ) V row by row with the row max
 * subtracted, accumulating in double. */
#ifndef ATTENTION_C_H
#define ATTENTION_C_H

#include "attn_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The input rules of attn_plugin.h: returns ATTN_OK, or ATTN_ERR_INVALID with
 * a message naming the tensor/option and index. */
int attention_c_validate(const attn_problem *p, const float *q, const float *k, const float *v,
                         char *error, size_t error_size);

/* Whether query i of (b, h) may read key j under every mask in force. */
int attention_c_readable(const attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j);

int attention_c_forward(const attn_problem *p, const float *q, const float *k, const float *v,
                        float *out, float *weights, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
