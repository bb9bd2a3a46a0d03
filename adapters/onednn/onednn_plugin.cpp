// oneDNN (libdnnl 2.x) as an attncheck plugin: attention composed of its
// primitives, S = matmul(Q, Kᵀ) with output scale scale/τ, the mask, A =
// softmax(S) along keys, O = matmul(A, V).
//     attncheck verify --impl plugin:build/plugins/libattn_onednn_plugin.so
// The mask is applied by the plugin's own code: masked entries of S are set
// to −inf after the matmul (oneDNN 2.x has no masked fill). With
// ATTNCHECK_ONEDNN_MASK=additive in the environment it is instead oneDNN's
// additive binary post-op of 0 / −inf (plugin name "onednn-X.Y.Z-additive-mask"),
// which turns a masked key's +inf logit into NaN (+inf − inf) and its row into
// NaN: a finding about that composition (docs/third-party.md).
// A row whose fp32 logits overflow comes out of oneDNN as NaN (an inf logit,
// or every readable logit −inf); the plugin then returns ATTN_ERR_UNSUPPORTED
// naming the row (declined_row below), as DESIGN.md "Range" asks. That decline
// is the plugin's code, not oneDNN's.
#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
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

// What oneDNN returned for one row of n values.
const char* returned(const float* x, int64_t n) {
  bool nan = false, inf = false, zero = true;
  for (int64_t i = 0; i < n; ++i) {
    nan = nan || std::isnan(x[i]);
    inf = inf || std::isinf(x[i]);
    zero = zero && x[i] == 0;
  }
  return nan ? "NaN" : inf ? "inf" : zero ? "zeros" : "finite values";
}

// The first row [b][h][i] (in batch, head, row order) with a readable key that
// oneDNN did not compute: a readable logit +inf or NaN (its softmax is NaN),
// every readable logit −inf (its softmax is NaN or zeros), or a non-finite
// output or weight. A readable −inf logit beside a finite one is not declined:
// its weight is exactly 0 in fp32 either way. `logits` are the softmax's input
// (masked entries as oneDNN holds them), `readable` null when nothing is
// masked. Empty string when every such row is finite.
std::string declined_row(const attn_problem* p, const float* logits, const float* readable,
                         const char* empty_row, const float* out, const float* weights) {
  const int64_t n_q = p->n_q, n_k = p->n_k, d_v = p->d_v;
  char text[512];
  for (int64_t b = 0; b < p->batch; ++b)
    for (int64_t h = 0; h < p->heads; ++h)
      for (int64_t i = 0; i < n_q; ++i) {
        const int64_t row = (b * p->heads + h) * n_q + i;
        if (empty_row[row]) continue;
        const float* s = logits + row * n_k;
        const float* o = out + row * d_v;
        const float* a = weights + row * n_k;
        auto ok = [&](int64_t j) { return readable == nullptr || readable[row * n_k + j] == 0; };
        int64_t up = -1, first = -1, n_readable = 0, not_finite = 0, masked_nan = -1;
        bool all_down = true;
        for (int64_t j = 0; j < n_k; ++j) {
          if (!ok(j)) {
            if (std::isnan(s[j]) && masked_nan < 0) masked_nan = j;
            continue;
          }
          if (first < 0) first = j;
          ++n_readable;
          if (!std::isfinite(s[j])) ++not_finite;
          if ((std::isnan(s[j]) || s[j] == std::numeric_limits<float>::infinity()) && up < 0) up = j;
          all_down = all_down && s[j] == -std::numeric_limits<float>::infinity();
        }
        int64_t bad_col = -1;
        for (int64_t c = 0; c < d_v && bad_col < 0; ++c)
          if (!std::isfinite(o[c])) bad_col = c;
        bool bad_weight = false;
        for (int64_t j = 0; j < n_k; ++j) bad_weight = bad_weight || !std::isfinite(a[j]);
        const char* got = returned(o, d_v);
        if (up >= 0)
          std::snprintf(text, sizeof text,
                        "row [%lld][%lld][%lld]: the fp32 logit of readable key %lld is %g (%lld of the row's %lld "
                        "readable logits are not finite); oneDNN returns %s for this row, so the plugin declines it",
                        (long long)b, (long long)h, (long long)i, (long long)up, (double)s[up], (long long)not_finite,
                        (long long)n_readable, got);
        else if (all_down)
          std::snprintf(text, sizeof text,
                        "row [%lld][%lld][%lld]: every readable logit overflows to -inf (%lld keys; the first is key "
                        "%lld); oneDNN returns %s for this row, so the plugin declines it",
                        (long long)b, (long long)h, (long long)i, (long long)n_readable, (long long)first, got);
        else if (bad_col < 0 && !bad_weight)
          continue;
        else if (masked_nan >= 0)
          std::snprintf(text, sizeof text,
                        "row [%lld][%lld][%lld]: every readable logit is finite, but masked key %lld's logit is NaN "
                        "(its overflowing logit plus the additive -inf mask) and oneDNN returns %s for this row, so "
                        "the plugin declines it",
                        (long long)b, (long long)h, (long long)i, (long long)masked_nan, got);
        else if (bad_col >= 0)
          std::snprintf(text, sizeof text,
                        "row [%lld][%lld][%lld]: every readable logit is finite, but O column %lld is %g (the "
                        "weighted sum of V overflows fp32); oneDNN returns %s for this row, so the plugin declines it",
                        (long long)b, (long long)h, (long long)i, (long long)bad_col, (double)o[bad_col], got);
        else
          std::snprintf(text, sizeof text,
                        "row [%lld][%lld][%lld]: every readable logit is finite, but a weight is not; oneDNN returns "
                        "%s for this row, so the plugin declines it",
                        (long long)b, (long long)h, (long long)i, got);
        return text;
      }
  return {};
}

// ATTNCHECK_ONEDNN_MASK=additive: the mask as oneDNN's additive post-op.
bool additive_mask() {
  const char* mode = std::getenv("ATTNCHECK_ONEDNN_MASK");
  return mode != nullptr && std::strcmp(mode, "additive") == 0;
}

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
    const bool post_op_mask = masked && additive_mask();
    if (post_op_mask) {
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
    if (post_op_mask) {
      mask_mem = memory(s_md, engine, additive.data());
      args.insert({DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mask_mem});
    }
    dnnl::matmul(scores_pd).execute(stream, args);
    stream.wait();
    if (masked && !post_op_mask)  // the plugin's own masked fill: a masked key's logit never reaches the softmax
      for (size_t idx = 0; idx < scores.size(); ++idx)
        if (additive[idx] != 0) scores[idx] = -std::numeric_limits<float>::infinity();
    const std::vector<float> logits = scores;  // the softmax's input, kept for the range check below
    dnnl::softmax_forward(softmax_pd).execute(stream, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_DST, s_mem}});
    stream.wait();
    // A row with every key masked has no softmax (NaN); the zero policy asks for zeros.
    for (size_t row = 0; row < empty_row.size(); ++row)
      if (empty_row[row]) std::memset(&scores[row * static_cast<size_t>(n_k)], 0, sizeof(float) * static_cast<size_t>(n_k));
    dnnl::matmul(output_pd).execute(stream, {{DNNL_ARG_SRC, s_mem}, {DNNL_ARG_WEIGHTS, v_mem}, {DNNL_ARG_DST, o_mem}});
    stream.wait();
    const std::string declined = declined_row(p, logits.data(), masked ? additive.data() : nullptr,
                                              empty_row.data(), out, scores.data());
    if (!declined.empty()) {
      std::snprintf(error, error_size, "%s", declined.c_str());
      return ATTN_ERR_UNSUPPORTED;
    }
    if (weights) std::memcpy(weights, scores.data(), scores.size() * sizeof(float));
    return ATTN_OK;
  } catch (const dnnl::error& e) {
    std::snprintf(error, error_size, "oneDNN: %s (status %d)", e.what(), static_cast<int>(e.status));
    return ATTN_ERR_INTERNAL;
  }
}

constexpr uint32_t kFeatures =
    ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS | ATTN_FEATURE_SCALE |
        ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT | ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT |
        ATTN_FEATURE_KEY_PADDING | ATTN_FEATURE_EXPLICIT_MASK | ATTN_FEATURE_EMPTY_ROW_REJECT |
        ATTN_FEATURE_EMPTY_ROW_ZERO | ATTN_FEATURE_WEIGHTS;

const attn_plugin onednn_plugin = {ATTN_PLUGIN_ABI_VERSION, "onednn-" ONEDNN_VERSION_TEXT, kFeatures,
                                   ATTN_PRECISION_FP32, forward};
const attn_plugin onednn_additive_plugin = {ATTN_PLUGIN_ABI_VERSION, "onednn-" ONEDNN_VERSION_TEXT "-additive-mask",
                                            kFeatures, ATTN_PRECISION_FP32, forward};

}  // namespace

extern "C" ATTN_PLUGIN_EXPORT const attn_plugin* attn_plugin_init(void) {
  return additive_mask() ? &onednn_additive_plugin : &onednn_plugin;
}
