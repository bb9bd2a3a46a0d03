#include "attncheck/explain.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace attncheck {

std::string precision_for_digits(int digits) {
  if (digits < 1 || digits > 95)
    throw InvalidInput(fmt::format("option --digits is {}; it must lie in [1, 95]", digits));
  if (digits <= 12) return "double";
  if (digits <= 16) return "long double";
  if (digits <= 45) return "mp50";
  return "mp100";
}

template <class T>
std::string format_number(const T& x, int digits) {
  using std::isinf;
  if (isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return "0";  // also -0, which R and S can hold
  if constexpr (std::is_floating_point_v<T>) {
    return fmt::format("{:.{}g}", x, digits);
  } else {
    return x.str(digits, std::ios_base::fmtflags(0));
  }
}

template <class T>
std::string format_table(const std::string& label, const RefMatrix<T>& m, int digits,
                         bool row_sums) {
  const int64_t rows = m.rows(), cols = m.cols();
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(rows));
  std::vector<size_t> width(size_t(cols), 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      cells[size_t(i)].push_back(format_number(m(i, j), digits));
      width[size_t(j)] = std::max(width[size_t(j)], cells[size_t(i)].back().size());
    }
  }
  std::string out = fmt::format("{}  [{}x{}]{}\n", label, rows, cols,
                                row_sums ? "   (| row sum)" : "");
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j)
      out += fmt::format("  {:>{}}", cells[size_t(i)][size_t(j)], width[size_t(j)]);
    if (row_sums) {
      T sum(0);
      for (int64_t j = 0; j < cols; ++j) sum += m(i, j);
      out += "  | " + format_number(sum, digits);
    }
    out += "\n";
  }
  return out;
}

template <class T>
std::string format_tables(const Problem& problem, const ReferenceTables<T>& t, int digits) {
  const std::string s_label =
      problem.scale ? fmt::format("S = QKᵀ·scale (scale = {})", *problem.scale)
                    : fmt::format("S = QKᵀ/√d_k (d_k = {})", problem.shape.d_k);
  const std::string l_label = fmt::format("L = (S + M)/τ (τ = {})", problem.temperature);
  std::string out;
  out += format_table("Q", t.Q, digits) + "\n";
  out += format_table("K", t.K, digits) + "\n";
  out += format_table("V", t.V, digits) + "\n";
  out += format_table("R = QKᵀ", t.R, digits) + "\n";
  out += format_table(s_label, t.S, digits) + "\n";
  out += format_table("M (0 = may read, -inf = masked)", t.M, digits) + "\n";
  out += format_table(l_label, t.L, digits) + "\n";
  out += format_table("A = softmax(L), row-wise", t.A, digits, true) + "\n";
  out += format_table("O = AV", t.O, digits);
  return out;
}

namespace {

template <class T>
std::string tables_in(const Case& c, const ExplainOptions& o) {
  const ReferenceTables<T> t =
      reference_tables<T>(c.problem, c.q, c.k, c.v, o.batch, o.head);
  return format_tables(c.problem, t, o.digits);
}

}  // namespace

std::string explain(const Case& c, const ExplainOptions& o, const std::string& title) {
  const std::string precision = precision_for_digits(o.digits);
  std::string tables;
  if (precision == "double") tables = tables_in<double>(c, o);
  else if (precision == "long double") tables = tables_in<long double>(c, o);
  else if (precision == "mp50") tables = tables_in<mp50>(c, o);
  else tables = tables_in<mp100>(c, o);

  std::string out;
  if (!title.empty()) out += title + "\n";
  out += fmt::format("problem {}, slice batch {} head {}, empty rows: {}\n",
                     canonical_name(c.problem), o.batch, o.head, to_string(c.problem.empty_rows));
  out += fmt::format("reference in {}, printed to {} significant digits\n\n", precision, o.digits);
  return out + tables;
}

#define ATTNCHECK_EXPLAIN_INSTANTIATE(T)                                                   \
  template std::string format_number<T>(const T&, int);                                    \
  template std::string format_table<T>(const std::string&, const RefMatrix<T>&, int, bool); \
  template std::string format_tables<T>(const Problem&, const ReferenceTables<T>&, int);
ATTNCHECK_EXPLAIN_INSTANTIATE(double)
ATTNCHECK_EXPLAIN_INSTANTIATE(long double)
ATTNCHECK_EXPLAIN_INSTANTIATE(mp50)
ATTNCHECK_EXPLAIN_INSTANTIATE(mp100)

}  // namespace attncheck
