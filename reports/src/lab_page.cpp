// The chapter's lab: five tokens, fixed Q, K, V, and every state of its
// controls (query row, temperature, causal mask) computed by the mp50
// reference and embedded in one self-contained page. docs/lab.md tells where
// the matrices come from.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "attncheck/pages.h"
#include "attncheck/reference.h"
#include "page_support.h"

namespace attncheck {
namespace {

using json = nlohmann::json;

// The matrices as decimals: the page shows these strings, the reference gets
// the float nearest to each. Chosen so that with the causal mask and τ = 0.85
// query 3 (上下文) reads 0.376, 0.175, 0.448, 0, 0 (docs/lab.md: how).
const std::vector<std::vector<std::string>> kQ = {{"0.5", "1.0", "-0.2"},
                                                  {"0.9", "-0.3", "0.4"},
                                                  {"0.88", "0.62", "0.88"},
                                                  {"-0.4", "0.7", "1.1"},
                                                  {"1.2", "0.5", "-0.6"}};
const std::vector<std::vector<std::string>> kK = {{"1.0", "0.2", "0.5"},
                                                  {"0.1", "0.8", "-0.3"},
                                                  {"0.7", "0.9", "0.6"},
                                                  {"0.4", "-0.5", "1.0"},
                                                  {"-0.6", "0.3", "0.8"}};
const std::vector<std::vector<std::string>> kV = {
    {"1.0", "0.0"}, {"0.2", "0.9"}, {"-0.5", "1.4"}, {"0.8", "-0.6"}, {"0.3", "0.5"}};

// Decimals of the unrounded row sums and weights shown (the reference holds 50 digits).
constexpr std::streamsize kSumDecimals = 15;

// The slider: 0.10 to 3.00 in steps of 0.05, labelled with two decimals.
constexpr int kFirstTauHundredths = 10, kLastTauHundredths = 300, kTauStepHundredths = 5;

std::vector<float> flatten(const std::vector<std::vector<std::string>>& m) {
  std::vector<float> out;
  for (const auto& row : m)
    for (const std::string& x : row) out.push_back(std::stof(x));
  return out;
}

// Three decimals, as the chapter prints weights; never "-0.000".
std::string fixed3(double x) {
  std::string s = fmt::format("{:.3f}", x);
  return s == "-0.000" ? "0.000" : s;
}

template <class F>
json matrix(int64_t rows, int64_t cols, F cell) {
  json m = json::array();
  for (int64_t i = 0; i < rows; ++i) {
    json row = json::array();
    for (int64_t j = 0; j < cols; ++j) row.push_back(cell(i, j));
    m.push_back(row);
  }
  return m;
}

// Thousandths of a three-decimal label ("0.376" → 376), to add displayed values exactly.
long thousandths(const std::string& label) { return std::lround(std::stod(label) * 1000); }

json state_of(const Case& lab, const std::string& tau, bool causal) {
  Problem p = lab.problem;
  p.temperature = std::stod(tau);
  p.causal = causal ? Causal::top_left : Causal::none;
  const ReferenceTables<mp50> t = reference_tables<mp50>(p, lab.q, lab.k, lab.v, 0, 0);
  const int64_t n = t.A.rows();
  auto masked = [&](int64_t i, int64_t j) { return boost::multiprecision::isinf(t.M(i, j)); };
  json s;
  s["M"] = matrix(n, n, [&](int64_t i, int64_t j) { return masked(i, j) ? "−∞" : "0"; });
  s["L"] = matrix(n, n, [&](int64_t i, int64_t j) {
    return masked(i, j) ? std::string("−∞") : fixed3(static_cast<double>(t.L(i, j)));
  });
  // A masked weight is exactly 0 and shown as "0"; "0.000" is a weight that only rounds to it.
  s["A"] = matrix(n, n, [&](int64_t i, int64_t j) {
    return t.A(i, j) == 0 ? std::string("0") : fixed3(static_cast<double>(t.A(i, j)));
  });
  s["A_full"] = matrix(n, n, [&](int64_t i, int64_t j) { return t.A(i, j).str(kSumDecimals, std::ios_base::fixed); });
  s["O"] = matrix(n, t.O.cols(), [&](int64_t i, int64_t j) { return fixed3(static_cast<double>(t.O(i, j))); });
  // Heatmap bucket 0…10 (a weight to one decimal); -1 for a masked cell.
  s["heat"] = matrix(n, n, [&](int64_t i, int64_t j) {
    return masked(i, j) ? -1 : static_cast<int>(std::lround(static_cast<double>(t.A(i, j)) * 10));
  });
  json E = json::array(), rows = json::array();
  for (int64_t i = 0; i < n; ++i) {
    mp50 max_l = 0, sum_e = 0, sum_a = 0, entropy = 0;
    bool first = true;
    int64_t argmax = -1;
    json masked_keys = json::array();
    for (int64_t j = 0; j < n; ++j) {
      if (masked(i, j)) {
        masked_keys.push_back(j + 1);
        continue;
      }
      if (first || t.L(i, j) > max_l) max_l = t.L(i, j);
      if (first || t.A(i, j) > t.A(i, argmax)) argmax = j;
      first = false;
    }
    json e_row = json::array();
    long shown = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (masked(i, j)) {
        e_row.push_back("0");
        continue;
      }
      const mp50 e = exp(t.L(i, j) - max_l);
      sum_e += e;
      sum_a += t.A(i, j);
      if (t.A(i, j) > 0) entropy -= t.A(i, j) * log(t.A(i, j));
      e_row.push_back(fixed3(static_cast<double>(e)));
    }
    for (int64_t j = 0; j < n; ++j) shown += thousandths(s["A"][i][j].get<std::string>());
    E.push_back(e_row);
    rows.push_back({{"argmax", argmax + 1},
                    {"max", s["A"][i][argmax]},
                    {"masked", masked_keys},
                    {"max_l", fixed3(static_cast<double>(max_l))},
                    {"sum_e", fixed3(static_cast<double>(sum_e))},
                    {"sum_shown", fmt::format("{}.{:03}", shown / 1000, shown % 1000)},
                    {"sum_exact", sum_a.str(kSumDecimals, std::ios_base::fixed)},
                    {"entropy", fixed3(static_cast<double>(entropy))}});
  }
  s["E"] = E;
  s["rows"] = rows;
  return s;
}

}  // namespace

const std::vector<std::string>& lab_tokens() {
  static const std::vector<std::string> tokens = {"模型", "根据", "上下文", "分配", "权重"};
  return tokens;
}

Case lab_case() {
  Case c;
  c.problem.shape = {1, 1, 5, 5, 3, 2};
  c.problem.temperature = std::stod(kLabDefaultTemperature);
  c.problem.causal = kLabDefaultCausal ? Causal::top_left : Causal::none;
  c.q = flatten(kQ);
  c.k = flatten(kK);
  c.v = flatten(kV);
  c.labels["source"] = "attncheck lab (docs/lab.md)";
  return c;
}

std::vector<std::string> lab_temperature_labels() {
  std::vector<std::string> labels;
  for (int h = kFirstTauHundredths; h <= kLastTauHundredths; h += kTauStepHundredths)
    labels.push_back(fmt::format("{}.{:02}", h / 100, h % 100));
  return labels;
}

json lab_data() {
  const Case lab = lab_case();
  const ReferenceTables<mp50> t = reference_tables<mp50>(lab.problem, lab.q, lab.k, lab.v, 0, 0);
  json d;
  d["tokens"] = lab_tokens();
  d["d_k"] = 3;
  d["d_v"] = 2;
  d["sqrt_d_k"] = fixed3(std::sqrt(3.0));
  d["defaults"] = {{"query", kLabDefaultQuery}, {"tau", kLabDefaultTemperature}, {"causal", kLabDefaultCausal ? 1 : 0}};
  d["taus"] = lab_temperature_labels();
  d["Q"] = kQ;
  d["K"] = kK;
  d["V"] = kV;
  d["R"] = matrix(5, 5, [&](int64_t i, int64_t j) { return fixed3(static_cast<double>(t.R(i, j))); });
  d["S"] = matrix(5, 5, [&](int64_t i, int64_t j) { return fixed3(static_cast<double>(t.S(i, j))); });
  json states = json::object();
  for (const std::string& tau : lab_temperature_labels())
    for (const bool causal : {false, true}) states[tau + (causal ? "/1" : "/0")] = state_of(lab, tau, causal);
  d["states"] = states;
  return d;
}

std::string lab_page_html() {
  std::string h = pages::page_head("attncheck lab: scores, weights and the mask", "en");
  h += R"HTML(<body class="lab">
<h1>Scores, weights and the mask <span class="zh">交互实验：分数、权重与掩码</span></h1>
<p class="intro">Five tokens, one attention head with fixed Q (5×3), K (5×3) and V (5×2). The controls change
only the current query row, the temperature τ and the causal mask, so every change on the page has one cause.
Every number was computed by attncheck's 50-digit reference when this page was written (<code>attncheck lab</code>);
the page only looks them up. Weights are rounded to three decimals; a masked weight is exactly <b>0</b>, while
<b>0.000</b> is a weight that only rounds to zero.</p>
<details class="predict"><summary>Before you start: three predictions</summary>
<ol><li>What are the shapes of the nine tables Q, K, V, QKᵀ, QKᵀ/√d_k, M, L, A, O?</li>
<li>With query 3 (上下文) current, which two columns does the causal mask turn to zero?</li>
<li>Raising τ from 0.85 to 1.50: do the non-zero weights become more peaked or flatter? Does O change shape?</li></ol>
<p>And: true or false, “the token with the largest weight in the current row is the whole reason for the model's prediction”?
(False: this is one head of one layer with fixed matrices; a real model has other heads, residual paths and later layers.
Colour here only encodes the size of a weight.)</p></details>
<form id="controls" class="controls" onsubmit="return false">
<fieldset id="query-control"><legend>Current query row</legend></fieldset>
<div class="control"><label for="tau">Temperature τ</label>
<input type="range" id="tau" min="0" step="1">
<output id="tau-value" for="tau"></output></div>
<div class="control"><label><input type="checkbox" id="causal"> causal mask (key j masked for query i when j &gt; i)</label></div>
<div class="control"><button type="button" id="reset">Reset</button>
<button type="button" id="copy">Copy share URL</button>
<input type="text" id="share-url" readonly aria-label="share URL" size="48">
<span id="copy-status" role="status"></span></div>
</form>
<p id="note" class="note" role="alert" hidden></p>
<p id="summary" class="summary" role="status" aria-live="polite"></p>
<section class="grid" id="tables"></section>
<section><h2>Check the current row yourself <span class="zh">注意力计算复核</span></h2>
<p class="legend">The chapter's seven checking steps, with the numbers of the current state.</p>
<ol id="steps"></ol></section>
)HTML";
  h += "<script type=\"application/json\" id=\"lab-data\">" + pages::embed_json(lab_data()) + "</script>\n";
  h += "<script>\n" + std::string(pages::kPageKitJs) + "\n" + pages::kLabJs + "\n</script>\n</body>\n</html>\n";
  return h;
}

std::string write_lab_page(const std::string& dir) {
  if (dir.empty()) throw InvalidInput("lab: option -o: empty directory name");
  const std::filesystem::path path = std::filesystem::path(dir) / "lab.html";
  const std::string html = lab_page_html();  // computed before anything is created
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw InvalidInput(fmt::format("lab: option -o: cannot create the directory {}: {}", dir,
                                   ec ? ec.message() : "a file of that name exists"));
  write_page(html, path.string(), "-o");
  return path.string();
}

}  // namespace attncheck
