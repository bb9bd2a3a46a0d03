/* A straightforward attention in C99 shared by the example plugin and the
 * test plugins: validates its input as attn_plugin.h asks, then computes
 * O = softmax((Q Kᵀ · scale + M) / τ) V row by row with the row max
 * subtracted, accumulating in double. */
#ifndef ATTENTION_C_H
#define ATTENTION_C_H

#include "attn_plugin.h"

int attention_c_forward(const attn_problem *p, const float *q, const float *k, const float *v,
                        float *out, float *weights, char *error, size_t error_size);

#endif
