#include "attention_c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int reject(char *error, size_t error_size, const char *message) {
  if (error_size > 0) snprintf(error, error_size, "%s", message);
  return ATTN_ERR_INVALID;
}

static int check_finite(const char *name, const float *x, int64_t count, int64_t cols, char *error,
                        size_t error_size) {
  int64_t i;
  for (i = 0; i < count; ++i) {
    if (!isfinite(x[i])) {
      if (error_size > 0)
        snprintf(error, error_size, "%s element %lld (row %lld, col %lld) is not finite", name,
                 (long long)i, (long long)(i / cols), (long long)(i % cols));
      return ATTN_ERR_INVALID;
    }
  }
  return ATTN_OK;
}

int attention_c_readable(const attn_problem *p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p->key_lengths && j >= p->key_lengths[b]) return 0;
  if (p->mask_kind == ATTN_MASK_CAUSAL_TOP_LEFT && j > i) return 0;
  if (p->mask_kind == ATTN_MASK_CAUSAL_BOTTOM_RIGHT && j > i + (p->n_k - p->n_q)) return 0;
  if (p->mask_kind == ATTN_MASK_EXPLICIT) {
    const int64_t mb = p->mask_batch == 1 ? 0 : b;
    const int64_t mh = p->mask_heads == 1 ? 0 : h;
    return p->mask[((mb * p->mask_heads + mh) * p->n_q + i) * p->n_k + j] != 0;
  }
  return 1;
}

int attention_c_validate(const attn_problem *p, const float *q, const float *k, const float *v,
                         char *error, size_t error_size) {
  int64_t b, h, i, j;
  int rc;
  if (p->abi_version != ATTN_PLUGIN_ABI_VERSION) return reject(error, error_size, "ABI version");
  if (!(isfinite(p->scale) && p->scale > 0))
    return reject(error, error_size, "scale must be finite and > 0");
  if (!(isfinite(p->temperature) && p->temperature > 0))
    return reject(error, error_size, "temperature must be finite and > 0");
  if (p->key_lengths) {
    for (b = 0; b < p->batch; ++b)
      if (p->key_lengths[b] < 0 || p->key_lengths[b] > p->n_k)
        return reject(error, error_size, "key_lengths outside [0, n_k]");
  }
  rc = check_finite("Q", q, p->batch * p->heads * p->n_q * p->d_k, p->d_k, error, error_size);
  if (rc == ATTN_OK)
    rc = check_finite("K", k, p->batch * p->heads * p->n_k * p->d_k, p->d_k, error, error_size);
  if (rc == ATTN_OK)
    rc = check_finite("V", v, p->batch * p->heads * p->n_k * p->d_v, p->d_v, error, error_size);
  if (rc != ATTN_OK) return rc;
  if (p->empty_row_policy == ATTN_EMPTY_ROW_REJECT) {
    for (b = 0; b < p->batch; ++b)
      for (h = 0; h < p->heads; ++h)
        for (i = 0; i < p->n_q; ++i) {
          int any = 0;
          for (j = 0; j < p->n_k && !any; ++j) any = attention_c_readable(p, b, h, i, j);
          if (!any) {
            if (error_size > 0)
              snprintf(error, error_size, "empty row: every key is masked for b=%lld h=%lld row=%lld",
                       (long long)b, (long long)h, (long long)i);
            return ATTN_ERR_INVALID;
          }
        }
  }
  return ATTN_OK;
}

int attention_c_forward(const attn_problem *p, const float *q, const float *k, const float *v,
                        float *out, float *weights, char *error, size_t error_size) {
  int64_t b, h, i, j, c;
  double *logits;
  int rc = attention_c_validate(p, q, k, v, error, error_size);
  if (rc != ATTN_OK) return rc;
  logits = (double *)malloc((size_t)p->n_k * sizeof(double));
  if (!logits) {
    if (error_size > 0) snprintf(error, error_size, "out of memory");
    return ATTN_ERR_INTERNAL;
  }
  for (b = 0; b < p->batch; ++b) {
    for (h = 0; h < p->heads; ++h) {
      const int64_t slice = b * p->heads + h;
      const float *qs = q + slice * p->n_q * p->d_k;
      const float *ks = k + slice * p->n_k * p->d_k;
      const float *vs = v + slice * p->n_k * p->d_v;
      for (i = 0; i < p->n_q; ++i) {
        float *o = out + (slice * p->n_q + i) * p->d_v;
        float *w = weights ? weights + (slice * p->n_q + i) * p->n_k : NULL;
        double max = -INFINITY, sum = 0;
        for (j = 0; j < p->n_k; ++j) {
          double dot = 0;
          if (!attention_c_readable(p, b, h, i, j)) {
            logits[j] = -INFINITY;
            continue;
          }
          for (c = 0; c < p->d_k; ++c) dot += (double)qs[i * p->d_k + c] * ks[j * p->d_k + c];
          logits[j] = dot * p->scale / p->temperature;
          if (logits[j] > max) max = logits[j];
        }
        for (j = 0; j < p->n_k; ++j) {
          logits[j] = max == -INFINITY || logits[j] == -INFINITY ? 0 : exp(logits[j] - max);
          sum += logits[j];
        }
        for (c = 0; c < p->d_v; ++c) {
          double acc = 0;
          for (j = 0; j < p->n_k; ++j) acc += logits[j] * vs[j * p->d_v + c];
          o[c] = sum > 0 ? (float)(acc / sum) : 0.0f;
        }
        if (w)
          for (j = 0; j < p->n_k; ++j) w[j] = sum > 0 ? (float)(logits[j] / sum) : 0.0f;
      }
    }
  }
  free(logits);
  return ATTN_OK;
}
