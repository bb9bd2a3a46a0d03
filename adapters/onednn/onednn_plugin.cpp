// oneDNN (libdnnl 2.x) as an attncheck plugin: attention composed of its
// primitives, S = matmul(Q, Kᵀ) with output scale scale/τ and the mask as an
// additive binary post-op (0 or −inf), A = softmax(S) along keys, O = matmul(A, V).
//     attncheck verify --impl plugin:build/plugins/libattn_onednn_plugin.so
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include <unordered_map>

#include "attention_c.h"
#include "attn_plugin.h"

#define ONEDNN_STRINGIFY2(x) #x
#define ONEDNN_STRINGIFY(x) ONEDNN_STRINGIFY2(x)
#define ONEDNN_VERSION_TEXT                                                     \
  ONEDNN_STRINGIFY(DNNL_VERSION_MAJOR) "." ONEDNN_STRINGIFY(DNNL_VERSION_MINOR) "." \
      ONEDNN_STRINGIFY(DNNL_VERSION_PATCH)

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

int forward(const attn_problem* p, const float* q, const float* k, const float* v, float* out,
            float* weights, char* error, size_t error_size) {
  // The input rules are the same for every plugin; the computation is oneDNN's.
  if (const int rc = attention_c_validate(p, q, k, v, error, error_size); rc != ATTN_OK) return rc;
  try {
    const memory::dim bh = p->batch * p->heads, n_q = p->n_q, n_k = p->n_k, d_k = p->d_k, d_v = p->d_v;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);

    const memory::desc q_md({bh, n_q, d_k}, dt::f32, tag::abc);
    // Kᵀ as a strided view of K: no copy.
    const memory::desc kt_md({bh, d_k, n_k}, dt::f32, memory::dims{n_k * d_k, 1, d_k});
    const memory::desc s_md({bh, n_q, n_k}, dt::f32, tag::abc);
    const memory::desc v_md({bh, n_k, d_v}, dt::f32, tag::abc);
    const memory::desc o_md({bh, n_q, d_v}, dt::f32, tag::abc);

    // Additive mask 0 / −inf over [batch·heads][n_q][n_k], and the empty rows.
    const bool masked = p->mask_kind != ATTN_MASK_NONE || p->key_lengths != nullptr;
    std::vector<float> additive;
    std::vector<char> empty_row(static_cast<size_t>(bh * n_q), 0);
    if (masked) {
      additive.resize(static_cast<size_t>(bh * n_q * n_k));
      for (int64_t b = 0; b < p->batch; ++b)
        for (int64_t h = 0; h < p->heads; ++h)
          for (int64_t i = 0; i < n_q; ++i) {
            const int64_t row = (b * p->heads + h) * n_q + i;
            bool any = false;
            for (int64_t j = 0; j < n_k; ++j) {
              const bool ok = attention_c_readable(p, b, h, i, j);
              any = any || ok;
              additive[static_cast<size_t>(row * n_k + j)] = ok ? 0.0f : -std::numeric_limits<float>::infinity();
            }
            empty_row[static_cast<size_t>(row)] = !any;
          }
    }

    dnnl::primitive_attr scores_attr;
    scores_attr.set_output_scales(0, {static_cast<float>(p->scale / p->temperature)});
    if (masked) {
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_add, s_md);
      scores_attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc scores_pd(dnnl::matmul::desc(q_md, kt_md, s_md), scores_attr, engine);
    const dnnl::softmax_forward::primitive_desc softmax_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md, 2), engine);
    const dnnl::matmul::primitive_desc output_pd(dnnl::matmul::desc(s_md, v_md, o_md), engine);

    // oneDNN takes non-const pointers; it only reads sources (the harness maps them read-only).
    memory q_mem(q_md, engine, const_cast<float*>(q));
    memory k_mem(kt_md, engine, const_cast<float*>(k));
    memory v_mem(v_md, engine, const_cast<float*>(v));
    std::vector<float> scores(static_cast<size_t>(bh * n_q * n_k));
    memory s_mem(s_md, engine, scores.data());
    memory o_mem(o_md, engine, out);

    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, q_mem}, {DNNL_ARG_WEIGHTS, k_mem}, {DNNL_ARG_DST, s_mem}};
    memory mask_mem;
    if (masked) {
      mask_mem = memory(s_md, engine, additive.data());
      args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mask_mem});
    }
    dnnl::matmul(scores_pd).execute(stream, args);
    dnnl::softmax_forward(softmax_pd).execute(stream, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, s_mem}});
    stream.wait();
    // A row with every key masked has no softmax (NaN); the zero policy asks for zeros.
    for (size_t row = 0; row < empty_row.size(); ++row)
      if (empty_row[row]) std::memset(&scores[row * static_cast<size_t>(n_k)], 0, sizeof(float) * static_cast<size_t>(n_k));
    dnnl::matmul(output_pd).execute(stream, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_WEIGHTS, v_mem}, {DNNL_ARG_DST, o_mem}});
    stream.wait();
    if (weights) std::memcpy(weights, scores.data(), scores.size() * sizeof(float));
    return ATTN_OK;
  } catch (const dnnl::error& e) {
    std::snprintf(error, error_size, "oneDNN: %s (status %d)", e.what(), static_cast<int>(e.status));
    return ATTN_ERR_INTERNAL;
  }
}

const attn_plugin onednn_plugin = {
    ATTN_PLUGIN_ABI_VERSION,
    "onednn-" ONEDNN_VERSION_TEXT,
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT | ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT |
        ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK | ATTN_FEATURE_EMPTY_ROW_REJECT |
        ATTN_FEATURE_EMPTY_ROW_ZERO | ATTN_FEATURE_WEIGHTS,
    ATTN_PRECISION_FP32,
    forward,
};

}  // namespace

extern "C" ATTN_PLUGIN_EXPORT const attn_plugin* attn_plugin_init(void) { return &onednn_plugin; }
