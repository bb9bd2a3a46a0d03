// The page of one case: the nine tables of each embedded slice from the
// reference and, with an implementation, its A and O beside the reference's
// with every cell's error, bound and error ÷ bound (the tolerance model of
// docs/tolerance.md); cells beyond their bound are marked as compare_slice()
// marks them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "attncheck/pages.h"
#include "attncheck/properties.h"
#include "attncheck/tolerance.h"  // before reference.h: its Oracle::mp50 would otherwise shadow the type mp50
#include "attncheck/reference.h"
#include "page_support.h"

namespace attncheck {
namespace {

using json = nlohmann::json;

// Cells listed by name in the summary; the rest are counted.
constexpr size_t kListedCells = 50;

std::string shown_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+∞" : "−∞";
  if (x == 0) return "0";
  return fmt::format("{:.4g}", x);
}

std::string full_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+∞" : "−∞";
  return fmt::format("{:.9g}", x);
}

struct Window {
  int64_t rows, cols, shown_rows, shown_cols;
};

Window window(int64_t rows, int64_t cols, const CasePageOptions& o) {
  return {rows, cols, std::min(rows, o.max_rows), std::min(cols, o.max_cols)};
}

// One table's shown corner: display text and a title per cell.
template <class F>
json table_json(const Window& w, F value) {
  json v = json::array(), t = json::array();
  for (int64_t i = 0; i < w.shown_rows; ++i) {
    json vr = json::array(), tr = json::array();
    for (int64_t j = 0; j < w.shown_cols; ++j) {
      const double x = value(i, j);
      vr.push_back(shown_number(x));
      tr.push_back(full_number(x));
    }
    v.push_back(vr);
    t.push_back(tr);
  }
  return {{"rows", w.rows}, {"cols", w.cols}, {"v", v}, {"t", t}};
}

// Heatmap bucket 0…10 of a weight (a weight to one decimal); -1 masked, -2 not a weight in [0, 1].
int heat_bucket(double a, bool masked) {
  if (masked) return -1;
  if (!(a >= 0 && a <= 1)) return -2;
  return static_cast<int>(std::lround(a * 10));
}

template <class T>
json reference_slice(const Case& c, int64_t b, int64_t h, const CasePageOptions& o) {
  const Shape& s = c.problem.shape;
  const ReferenceTables<T> t = reference_tables<T>(c.problem, c.q, c.k, c.v, b, h);
  auto d = [](const T& x) { return static_cast<double>(x); };
  json tables;
  tables["Q"] = table_json(window(s.n_q, s.d_k, o), [&](int64_t i, int64_t j) { return d(t.Q(i, j)); });
  tables["K"] = table_json(window(s.n_k, s.d_k, o), [&](int64_t i, int64_t j) { return d(t.K(i, j)); });
  tables["V"] = table_json(window(s.n_k, s.d_v, o), [&](int64_t i, int64_t j) { return d(t.V(i, j)); });
  const Window scores = window(s.n_q, s.n_k, o);
  tables["R"] = table_json(scores, [&](int64_t i, int64_t j) { return d(t.R(i, j)); });
  tables["S"] = table_json(scores, [&](int64_t i, int64_t j) { return d(t.S(i, j)); });
  tables["M"] = table_json(scores, [&](int64_t i, int64_t j) { return d(t.M(i, j)); });
  tables["L"] = table_json(scores, [&](int64_t i, int64_t j) { return d(t.L(i, j)); });
  tables["A"] = table_json(scores, [&](int64_t i, int64_t j) { return d(t.A(i, j)); });
  tables["O"] = table_json(window(s.n_q, s.d_v, o), [&](int64_t i, int64_t j) { return d(t.O(i, j)); });
  json heat = json::array(), sums = json::array();
  for (int64_t i = 0; i < scores.shown_rows; ++i) {
    json row = json::array();
    for (int64_t j = 0; j < scores.shown_cols; ++j)
      row.push_back(heat_bucket(d(t.A(i, j)), !allowed(c.problem, b, h, i, j)));
    heat.push_back(row);
  }
  for (int64_t i = 0; i < scores.shown_rows; ++i) {
    T sum = 0;
    for (int64_t j = 0; j < s.n_k; ++j) sum += t.A(i, j);
    sums.push_back(full_number(d(sum)));
  }
  tables["A"]["heat"] = heat;
  tables["A"]["row_sums"] = sums;
  return tables;
}

json reference_slice(Oracle oracle, const Case& c, int64_t b, int64_t h, const CasePageOptions& o) {
  switch (oracle) {
    case Oracle::long_double: return reference_slice<long double>(c, b, h, o);
    case Oracle::mp50: return reference_slice<mp50>(c, b, h, o);
    case Oracle::mp100: return reference_slice<mp100>(c, b, h, o);
  }
  return {};
}

// The implementation's side of one table (A or O) of slice (b, h): every
// shown cell with its title, the marks, and counts over all cells.
struct Judged {
  json table;
  int64_t beyond = 0, cells = 0;
  double worst = 0;
  std::string worst_cell;
  json listed = json::array();
};

Judged judge_table(const std::string& name, const Case& c, int64_t b, int64_t h, int64_t cols,
                   const std::vector<float>& got, const std::vector<double>& expected, const std::vector<double>& bound,
                   const CasePageOptions& o) {
  const Shape& s = c.problem.shape;
  const int64_t rows = s.n_q;
  const Window w = window(rows, cols, o);
  const int64_t base = (b * s.heads + h) * rows * cols;
  Judged j;
  j.cells = rows * cols;
  json v = json::array(), t = json::array(), x = json::array(), heat = json::array();
  for (int64_t r = 0; r < rows; ++r) {
    json vr = json::array(), tr = json::array(), xr = json::array(), hr = json::array();
    for (int64_t col = 0; col < cols; ++col) {
      const size_t idx = static_cast<size_t>(base + r * cols + col);
      const double value = got[idx], ref = expected[idx];
      const double err = std::fabs(value - ref);
      // The rule of compare_slice(): an exact weight is never beyond; NaN or ∞ always is.
      const double ratio = (name == "A" && err == 0) ? 0 : (std::isfinite(err) ? err / bound[idx] : INFINITY);
      const bool beyond = !(ratio <= 1);
      const std::string cell = fmt::format("{}[{}][{}]", name, r, col);
      if (beyond) {
        ++j.beyond;
        if (j.listed.size() < kListedCells)
          j.listed.push_back(fmt::format("{}: implementation {}, reference {}, error {:.3g}, bound {:.3g}, error ÷ bound {:.3g}",
                                         cell, full_number(value), full_number(ref), err, bound[idx], ratio));
      }
      if (const double r_eff = std::isnan(ratio) ? INFINITY : ratio; r_eff > j.worst) {
        j.worst = r_eff;
        j.worst_cell = cell;
      }
      if (r < w.shown_rows && col < w.shown_cols) {
        vr.push_back(shown_number(value));
        tr.push_back(fmt::format("{}: implementation {}, reference {}, error {:.3g}, bound {:.3g}, error ÷ bound {:.3g}{}",
                                 cell, full_number(value), full_number(ref), err, bound[idx], ratio,
                                 beyond ? " — beyond its bound" : ""));
        xr.push_back(beyond ? 1 : 0);
        // A masked key the implementation gave weight to is shown by its weight, not hatched.
        if (name == "A") hr.push_back(heat_bucket(value, value == 0 && !allowed(c.problem, b, h, r, col)));
      }
    }
    if (r < w.shown_rows) {
      v.push_back(vr);
      t.push_back(tr);
      x.push_back(xr);
      if (name == "A") heat.push_back(hr);
    }
  }
  j.table = {{"rows", rows}, {"cols", cols}, {"v", v}, {"t", t}, {"beyond", x}};
  if (name == "A") j.table["heat"] = heat;
  return j;
}

// The worst error ÷ bound as the page prints it ("∞" for NaN or an exceeded zero bound).
json ratio_json(double ratio) { return std::isfinite(ratio) ? fmt::format("{:.3g}", ratio) : std::string("∞"); }

std::string problem_text(const Problem& p) {
  std::vector<std::string> parts;
  parts.push_back(fmt::format("batch {}, heads {}, n_q {}, n_k {}, d_k {}, d_v {}", p.shape.batch, p.shape.heads,
                              p.shape.n_q, p.shape.n_k, p.shape.d_k, p.shape.d_v));
  parts.push_back(p.scale ? fmt::format("scale {}", *p.scale) : fmt::format("scale 1/√{}", p.shape.d_k));
  parts.push_back(fmt::format("τ {}", p.temperature));
  parts.push_back("causal " + to_string(p.causal));
  if (!p.key_lengths.empty()) parts.push_back(fmt::format("key lengths {}", fmt::join(p.key_lengths, ", ")));
  if (p.mask) parts.push_back(fmt::format("explicit mask [{}][{}][{}][{}]", p.mask->batch, p.mask->heads, p.shape.n_q, p.shape.n_k));
  parts.push_back("empty rows: " + to_string(p.empty_rows));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

json case_page_data(const Case& c, Implementation* impl, const CasePageOptions& o) {
  const Shape& s = c.problem.shape;
  validate(c.problem, c.q, c.k, c.v);
  if (o.batch < 0 || o.batch >= s.batch || o.head < 0 || o.head >= s.heads)
    throw InvalidInput(fmt::format("option --batch/--head: slice ({}, {}) is outside batch {} × heads {}", o.batch,
                                   o.head, s.batch, s.heads));
  if (o.max_rows < 1 || o.max_cols < 1) throw InvalidInput("case page: max_rows and max_cols must be >= 1");
  const Precision precision = impl ? impl->precision() : Precision::fp32;
  const Oracle oracle = choose_oracle(c.problem, precision);

  json d;
  d["title"] = o.title;
  d["problem"] = canonical_name(c.problem);
  d["details"] = problem_text(c.problem);
  d["labels"] = c.labels;
  d["oracle"] = to_string(oracle);
  d["batch"] = s.batch;
  d["heads"] = s.heads;
  d["limits"] = {{"rows", o.max_rows}, {"cols", o.max_cols}};

  // The implementation's run, its bounds and the oracle's A and O, once for the whole case.
  std::vector<double> ref_a, ref_o;
  Run run;
  ErrorBounds bounds;
  bool have_run = false, weights = false;
  if (impl) {
    d["implementation"] = impl->name();
    d["precision"] = to_string(precision);
    weights = impl->capabilities().weights;
    try {
      run = run_implementation(*impl, c, weights, 1);
      have_run = true;
    } catch (const std::exception& e) {
      d["implementation_error"] = e.what();
    }
    if (have_run) {
      ref_o = oracle_attention(oracle, c, &ref_a);
      bounds = forward_error_bounds(c, {precision});
      if (!bounds.inconclusive_reason.empty()) d["inconclusive"] = bounds.inconclusive_reason;
    }
  }

  // The requested slice first, then the others in order while the budget lasts.
  const int64_t per_slice = [&] {
    auto cells = [&](int64_t r, int64_t cl) { return std::min(r, o.max_rows) * std::min(cl, o.max_cols); };
    return 2 * cells(s.n_k, s.d_k) + cells(s.n_q, s.d_k) + cells(s.n_k, s.d_v) + 7 * cells(s.n_q, s.n_k) +
           3 * cells(s.n_q, s.d_v);
  }();
  std::vector<std::pair<int64_t, int64_t>> order = {{o.batch, o.head}};
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      if (b != o.batch || h != o.head) order.emplace_back(b, h);
  json slices = json::array();
  int64_t used = 0, left_out = 0;
  for (const auto& [b, h] : order) {
    if (!slices.empty() && used + per_slice > o.max_embedded_cells) {
      ++left_out;
      continue;
    }
    used += per_slice;
    json slice = {{"b", b}, {"h", h}, {"reference", reference_slice(oracle, c, b, h, o)}};
    if (have_run) {
      const Judged out = judge_table("O", c, b, h, s.d_v, run.out, ref_o, bounds.out, o);
      json side = {{"O", out.table}};
      json summary = {{"O", {{"beyond", out.beyond}, {"cells", out.cells}, {"worst", ratio_json(out.worst)}, {"worst_cell", out.worst_cell}}}};
      json listed = out.listed;
      if (weights) {
        const Judged a = judge_table("A", c, b, h, s.n_k, run.weights, ref_a, bounds.weights, o);
        side["A"] = a.table;
        summary["A"] = {{"beyond", a.beyond}, {"cells", a.cells}, {"worst", ratio_json(a.worst)}, {"worst_cell", a.worst_cell}};
        for (const auto& x : a.listed) listed.push_back(x);
      }
      // Reference A and O as the oracle gives them (double), to sit beside the implementation's.
      const Window sw = window(s.n_q, s.n_k, o), ow = window(s.n_q, s.d_v, o);
      const int64_t slice_index = b * s.heads + h;
      side["reference_A"] = table_json(sw, [&](int64_t i, int64_t j) {
        return ref_a[static_cast<size_t>((slice_index * s.n_q + i) * s.n_k + j)];
      });
      side["reference_O"] = table_json(ow, [&](int64_t i, int64_t j) {
        return ref_o[static_cast<size_t>((slice_index * s.n_q + i) * s.d_v + j)];
      });
      slice["implementation"] = side;
      slice["summary"] = summary;
      slice["listed"] = listed;
    }
    slices.push_back(slice);
  }
  d["slices"] = slices;
  if (left_out > 0)
    d["left_out"] = fmt::format(
        "{} of the case's {} slices are not on this page (it holds at most {} shown cells); write a page for another "
        "slice with attncheck explain --batch B --head H --html",
        left_out, s.batch * s.heads, o.max_embedded_cells);
  return d;
}

std::string case_page_html(const Case& c, Implementation* impl, const CasePageOptions& o) {
  const json data = case_page_data(c, impl, o);
  std::string h = pages::page_head("attncheck case: " + data["problem"].get<std::string>(), "en");
  h += R"HTML(<body class="case">
<h1 id="title"></h1>
<p id="details" class="intro"></p>
<dl id="labels" class="labels"></dl>
<form class="controls" onsubmit="return false">
<div class="control"><label for="batch">batch</label> <select id="batch"></select>
<label for="head">head</label> <select id="head"></select></div>
</form>
<p id="note" class="note" role="alert" hidden></p>
<p id="summary" class="summary" role="status"></p>
<ul id="listed" class="listed"></ul>
<section id="comparison"></section>
<h2>The nine tables of the reference</h2>
<section class="grid" id="tables"></section>
)HTML";
  h += "<script type=\"application/json\" id=\"case-data\">" + pages::embed_json(data) + "</script>\n";
  h += "<script>\n" + std::string(pages::kPageKitJs) + "\n" + pages::kCaseJs + "\n</script>\n</body>\n</html>\n";
  return h;
}

void write_case_page_beside(const std::string& case_file, const Case& c, Implementation& impl, int64_t b, int64_t h) {
  CasePageOptions page;
  page.batch = b;
  page.head = h;
  // The file's name only, so the page does not depend on where the failures directory is.
  page.title = "case file " + std::filesystem::path(case_file).filename().string();
  write_page(case_page_html(c, &impl, page), case_page_path(case_file), "--failures-dir");
}

}  // namespace attncheck
