// ggml's CPU flash attention (ggml_flash_attn_ext, Q, K and V in fp32) as an
// attncheck plugin:
//     npm ci --ignore-scripts --prefix adapters/ggml
//     attncheck verify --impl plugin:build/plugins/libattn_ggml_plugin.so
//     attncheck bench --impl fused --impl plugin:build/plugins/libattn_ggml_plugin.so --n-q 1,16 --n-k 16384
// The ggml libraries are node-llama-cpp's prebuilt Linux x64 build (npm
// @node-llama-cpp/linux-x64, pinned in package.json): libggml-base.so and one
// libggml-cpu-<variant>.so per instruction set, of which the plugin loads the
// one ggml itself scores best for this CPU (ggml_backend_score), as ggml's
// own loader does. They are opened at run time (dlopen), so the plugin builds
// without them; ATTNCHECK_GGML_DIR names another directory holding them.
// No ggml header is shipped with them: the few declarations the plugin needs
// are below, for this pinned version.
//
// What the plugin adds to ggml (each is the plugin's code, not ggml's):
//   - the input rules of attn_plugin.h (attention_c_validate), empty rows
//     under the reject policy included;
//   - temperature, folded into ggml's scale (scale / τ; a mask of 0 / −inf
//     divided by τ is the same mask);
//   - masks (causal, key padding, explicit) as ggml's additive fp16 mask of
//     0 / −inf, [n_k][n_q padded to 64][1 or heads][1 or batch];
//   - zeros in empty rows under the zero policy, whatever ggml returned;
//   - a row ggml returned with a NaN or an infinity is declined
//     (ATTN_ERR_UNSUPPORTED naming the row): the harness accepts that only
//     when the row's fp32 logits overflow (DESIGN.md "Range").
// The graph of one shape is kept between calls (a KV cache is allocated
// once): a call copies Q, K, V in, computes, and copies the output out;
// attn_plugin_compute_seconds reports the graph computation alone.
#include <dlfcn.h>
#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "attention_c.h"
#include "attn_plugin.h"

#ifndef ATTNCHECK_GGML_DEFAULT_DIR
#define ATTNCHECK_GGML_DEFAULT_DIR ""
#endif

namespace {

// The parts of ggml's C API the plugin calls (ggml.h, ggml-backend.h and
// ggml-cpu.h of the pinned build). Enums are passed as int, as the C ABI does.
struct ggml_context;
struct ggml_tensor;
struct ggml_cgraph;
struct ggml_backend;
struct ggml_init_params {
  size_t mem_size;
  void* mem_buffer;
  bool no_alloc;
};
constexpr int kGgmlF32 = 0;   // GGML_TYPE_F32
constexpr int kGgmlF16 = 1;   // GGML_TYPE_F16
constexpr int kPrecF32 = 10;  // GGML_PREC_F32
constexpr int64_t kMaskPad = 64;  // GGML_KQ_MASK_PAD: the mask's rows, padded

struct Ggml {
  ggml_context* (*init)(ggml_init_params) = nullptr;
  void (*free)(ggml_context*) = nullptr;
  size_t (*tensor_overhead)() = nullptr;
  size_t (*graph_overhead)() = nullptr;
  ggml_tensor* (*new_tensor_4d)(ggml_context*, int, int64_t, int64_t, int64_t, int64_t) = nullptr;
  void* (*get_data)(const ggml_tensor*) = nullptr;
  ggml_tensor* (*flash_attn_ext)(ggml_context*, ggml_tensor*, ggml_tensor*, ggml_tensor*, ggml_tensor*, float, float,
                                 float) = nullptr;
  void (*flash_attn_ext_set_prec)(ggml_tensor*, int) = nullptr;
  ggml_cgraph* (*new_graph)(ggml_context*) = nullptr;
  void (*build_forward_expand)(ggml_cgraph*, ggml_tensor*) = nullptr;
  const char* (*version)() = nullptr;
  const char* (*commit)() = nullptr;
  int (*graph_compute)(ggml_backend*, ggml_cgraph*) = nullptr;  // ggml_backend_graph_compute
  ggml_backend* (*cpu_init)() = nullptr;                        // ggml_backend_cpu_init
  void (*cpu_set_n_threads)(ggml_backend*, int) = nullptr;
  std::string variant;  // the libggml-cpu-<variant>.so loaded
  std::string error;    // why the libraries could not be loaded
};

std::string library_dir() {
  const char* dir = std::getenv("ATTNCHECK_GGML_DIR");
  return dir && *dir ? dir : ATTNCHECK_GGML_DEFAULT_DIR;
}

template <typename F>
bool find(void* lib, const char* symbol, F& fn, std::string& error) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn && error.empty()) error = std::string("symbol ") + symbol + " not found in the ggml libraries";
  return fn != nullptr;
}

Ggml load_ggml() {
  Ggml g;
  const std::string dir = library_dir();
  const std::string hint = " (install them with: npm ci --ignore-scripts --prefix adapters/ggml; or set ATTNCHECK_GGML_DIR)";
  void* base = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!base) {
    g.error = "cannot load " + dir + "/libggml-base.so: " + dlerror() + hint;
    return g;
  }
  // The CPU variants in ggml's order of preference; ggml_backend_score says
  // which this CPU runs (0: not supported) and how well.
  static const char* const variants[] = {"sapphirerapids", "zen4",   "cooperlake", "cannonlake", "cascadelake",
                                         "icelake",        "skylakex", "alderlake", "haswell",    "sandybridge",
                                         "ivybridge",      "piledriver", "sse42",   "x64"};
  void* cpu = nullptr;
  int best = 0;
  for (const char* v : variants) {
    void* lib = dlopen((dir + "/libggml-cpu-" + v + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    auto score = reinterpret_cast<int (*)()>(dlsym(lib, "ggml_backend_score"));
    const int s = score ? score() : 0;
    if (s > best) {
      if (cpu) dlclose(cpu);
      cpu = lib;
      best = s;
      g.variant = v;
    } else {
      dlclose(lib);
    }
  }
  if (!cpu) {
    g.error = "no libggml-cpu-*.so in " + dir + " supports this CPU" + hint;
    return g;
  }
  std::string& e = g.error;
  find(base, "ggml_init", g.init, e);
  find(base, "ggml_free", g.free, e);
  find(base, "ggml_tensor_overhead", g.tensor_overhead, e);
  find(base, "ggml_graph_overhead", g.graph_overhead, e);
  find(base, "ggml_new_tensor_4d", g.new_tensor_4d, e);
  find(base, "ggml_get_data", g.get_data, e);
  find(base, "ggml_flash_attn_ext", g.flash_attn_ext, e);
  find(base, "ggml_flash_attn_ext_set_prec", g.flash_attn_ext_set_prec, e);
  find(base, "ggml_new_graph", g.new_graph, e);
  find(base, "ggml_build_forward_expand", g.build_forward_expand, e);
  find(base, "ggml_version", g.version, e);
  find(base, "ggml_commit", g.commit, e);
  find(base, "ggml_backend_graph_compute", g.graph_compute, e);
  find(cpu, "ggml_backend_cpu_init", g.cpu_init, e);
  find(cpu, "ggml_backend_cpu_set_n_threads", g.cpu_set_n_threads, e);
  return g;
}

Ggml& ggml() {
  static Ggml g = load_ggml();
  return g;
}

// The graph of the last shape seen, kept for the next call of that shape.
struct Graph {
  std::vector<double> key;  // shape, scale and mask layout it was built for
  ggml_context* ctx = nullptr;
  ggml_tensor *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr, *out = nullptr;
  ggml_cgraph* graph = nullptr;
  int64_t mask_heads = 1, mask_batch = 1, mask_rows = 0;
};

Graph g_graph;
ggml_backend* g_backend = nullptr;
int g_threads = 1;
double g_compute_seconds = 0;

// Whether the problem needs a mask, and the mask's head and batch extents
// (1 broadcasts, as in ggml).
bool masked(const attn_problem* p) { return p->mask_kind != ATTN_MASK_NONE || p->key_lengths != nullptr; }

Graph& graph_for(const attn_problem* p, float scale) {
  const int64_t mh = p->mask_kind == ATTN_MASK_EXPLICIT ? p->mask_heads : 1;
  const int64_t mb = p->key_lengths || (p->mask_kind == ATTN_MASK_EXPLICIT && p->mask_batch > 1) ? p->batch : 1;
  const std::vector<double> key = {double(p->batch), double(p->heads), double(p->n_q), double(p->n_k), double(p->d_k),
                                   double(p->d_v),   double(scale),    double(masked(p)), double(mh), double(mb)};
  Graph& gr = g_graph;
  if (gr.ctx && gr.key == key) return gr;
  Ggml& g = ggml();
  if (gr.ctx) g.free(gr.ctx);
  gr = Graph{};
  const int64_t rows = (p->n_q + kMaskPad - 1) / kMaskPad * kMaskPad;
  const size_t floats = size_t(p->batch * p->heads) * size_t(p->n_q * p->d_k + p->n_k * (p->d_k + p->d_v) + p->n_q * p->d_v);
  const size_t mask_bytes = masked(p) ? size_t(p->n_k * rows * mh * mb) * 2 : 0;
  ggml_init_params params{floats * sizeof(float) + mask_bytes + 8 * g.tensor_overhead() + g.graph_overhead() + (1u << 20),
                          nullptr, false};
  gr.ctx = g.init(params);
  if (!gr.ctx) return gr;
  // ggml's order of dimensions is innermost first.
  gr.q = g.new_tensor_4d(gr.ctx, kGgmlF32, p->d_k, p->n_q, p->heads, p->batch);
  gr.k = g.new_tensor_4d(gr.ctx, kGgmlF32, p->d_k, p->n_k, p->heads, p->batch);
  gr.v = g.new_tensor_4d(gr.ctx, kGgmlF32, p->d_v, p->n_k, p->heads, p->batch);
  if (masked(p)) gr.mask = g.new_tensor_4d(gr.ctx, kGgmlF16, p->n_k, rows, mh, mb);
  gr.mask_heads = mh;
  gr.mask_batch = mb;
  gr.mask_rows = rows;
  gr.out = g.flash_attn_ext(gr.ctx, gr.q, gr.k, gr.v, gr.mask, scale, 0.0f, 0.0f);  // no ALiBi, no soft-capping
  g.flash_attn_ext_set_prec(gr.out, kPrecF32);
  gr.graph = g.new_graph(gr.ctx);
  g.build_forward_expand(gr.graph, gr.out);
  gr.key = key;
  return gr;
}

// K and V larger than this are flushed from the caches after they are copied
// in, so that ggml reads them from memory, as an implementation streaming a
// KV cache that does not fit in the last-level cache does (and as fused does
// in the same benchmark); smaller ones stay cached, as they do for fused.
constexpr size_t kFlushBytes = size_t(16) << 20;

void flush(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  for (size_t at = 0; at < bytes; at += 64) _mm_clflush(p + at);
  _mm_mfence();
}

void fill_mask(const attn_problem* p, const Graph& gr) {
  constexpr uint16_t kZero = 0x0000, kMinusInf = 0xFC00;  // fp16
  auto* m = static_cast<uint16_t*>(ggml().get_data(gr.mask));
  for (int64_t b = 0; b < gr.mask_batch; ++b)
    for (int64_t h = 0; h < gr.mask_heads; ++h)
      for (int64_t i = 0; i < gr.mask_rows; ++i) {
        uint16_t* row = m + ((b * gr.mask_heads + h) * gr.mask_rows + i) * p->n_k;
        for (int64_t j = 0; j < p->n_k; ++j)
          row[j] = i < p->n_q && !attention_c_readable(p, b, h, i, j) ? kMinusInf : kZero;
      }
}

int forward(const attn_problem* p, const float* q, const float* k, const float* v, float* out, float* /*weights*/,
            char* error, size_t error_size) {
  if (const int rc = attention_c_validate(p, q, k, v, error, error_size); rc != ATTN_OK) return rc;
  Ggml& g = ggml();  // loaded: attn_plugin_init refused otherwise
  if (!g_backend) g_backend = g.cpu_init();
  if (!g_backend) {
    std::snprintf(error, error_size, "ggml_backend_cpu_init failed");
    return ATTN_ERR_INTERNAL;
  }
  const float scale = static_cast<float>(p->scale / p->temperature);
  Graph& gr = graph_for(p, scale);
  if (!gr.ctx) {
    std::snprintf(error, error_size, "ggml_init failed (out of memory?)");
    return ATTN_ERR_INTERNAL;
  }
  const int64_t B = p->batch, H = p->heads, n_q = p->n_q, n_k = p->n_k, d_k = p->d_k, d_v = p->d_v;
  std::memcpy(g.get_data(gr.q), q, sizeof(float) * size_t(B * H * n_q * d_k));
  std::memcpy(g.get_data(gr.k), k, sizeof(float) * size_t(B * H * n_k * d_k));
  std::memcpy(g.get_data(gr.v), v, sizeof(float) * size_t(B * H * n_k * d_v));
  if (gr.mask) fill_mask(p, gr);
  const size_t k_bytes = sizeof(float) * size_t(B * H * n_k * d_k), v_bytes = sizeof(float) * size_t(B * H * n_k * d_v);
  if (k_bytes + v_bytes > kFlushBytes) {
    flush(g.get_data(gr.k), k_bytes);
    flush(g.get_data(gr.v), v_bytes);
  }

  g.cpu_set_n_threads(g_backend, g_threads);
  const auto begin = std::chrono::steady_clock::now();
  const int status = g.graph_compute(g_backend, gr.graph);
  g_compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  if (status != 0) {
    std::snprintf(error, error_size, "ggml_backend_graph_compute returned status %d", status);
    return ATTN_ERR_INTERNAL;
  }

  // ggml's result is [batch][n_q][heads][d_v]; attncheck's [batch][heads][n_q][d_v].
  const auto* res = static_cast<const float*>(g.get_data(gr.out));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n_q; ++i) {
        const float* from = res + ((b * n_q + i) * H + h) * d_v;
        float* to = out + ((b * H + h) * n_q + i) * d_v;
        bool any = !masked(p);
        for (int64_t j = 0; j < n_k && !any; ++j) any = attention_c_readable(p, b, h, i, j);
        if (!any) {  // an empty row: zeros under the zero policy (reject was refused above)
          std::fill(to, to + d_v, 0.0f);
          continue;
        }
        for (int64_t c = 0; c < d_v; ++c) {
          if (!std::isfinite(from[c])) {
            std::snprintf(error, error_size,
                          "row [%lld][%lld][%lld]: ggml returns %s in column %lld of this row (its fp32 logits "
                          "overflow?), so the plugin declines it",
                          (long long)b, (long long)h, (long long)i, std::isnan(from[c]) ? "NaN" : "inf",
                          (long long)c);
            return ATTN_ERR_UNSUPPORTED;
          }
          to[c] = from[c];
        }
      }
  return ATTN_OK;
}

constexpr uint32_t kFeatures = ATTN_FEATURE_CROSS | ATTN_FEATURE_DV_NE_DK | ATTN_FEATURE_BATCH_HEADS |
                               ATTN_FEATURE_SCALE | ATTN_FEATURE_TEMPERATURE | ATTN_FEATURE_CAUSAL_TOP_LEFT |
                               ATTN_FEATURE_CAUSAL_BOTTOM_RIGHT | ATTN_FEATURE_KEY_PADDING |
                               ATTN_FEATURE_EXPLICIT_MASK | ATTN_FEATURE_EMPTY_ROW_REJECT | ATTN_FEATURE_EMPTY_ROW_ZERO;

std::string plugin_name() {
  const Ggml& g = ggml();
  return std::string("ggml-") + g.version() + "-" + g.commit() + "-flash-attn-ext-f32-" + g.variant;
}

}  // namespace

// Without ggml's libraries there is nothing to check: refuse at load, saying
// where they were looked for, instead of failing every case.
extern "C" ATTN_PLUGIN_EXPORT const attn_plugin* attn_plugin_init(void) {
  if (const Ggml& g = ggml(); !g.error.empty()) {
    std::fprintf(stderr, "ggml plugin: %s\n", g.error.c_str());
    return nullptr;
  }
  static const std::string name = plugin_name();
  static const attn_plugin plugin = {ATTN_PLUGIN_ABI_VERSION, name.c_str(), kFeatures, ATTN_PRECISION_FP32, forward};
  return &plugin;
}

extern "C" ATTN_PLUGIN_EXPORT double attn_plugin_compute_seconds(void) { return g_compute_seconds; }

extern "C" ATTN_PLUGIN_EXPORT void attn_plugin_set_threads(int threads) { g_threads = std::max(threads, 1); }
