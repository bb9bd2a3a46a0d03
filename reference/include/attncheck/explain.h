// Printing the nine tables of one slice, labelled as in the chapter. Used by
// `attncheck explain`, and by any later report that shows a counterexample
// (format_table takes any scalar the reference uses, and double for the output
// of an implementation under test).
#pragma once

#include <string>

#include "attncheck/case.h"
#include "attncheck/reference.h"

namespace attncheck {

/// The scalar type the reference uses to print `digits` significant digits,
/// keeping a few guard digits: "double" up to 12, "long double" up to 16, "mp50"
/// up to 45, "mp100" up to 95. Throws InvalidInput (naming --digits) otherwise.
std::string precision_for_digits(int digits);

/// One number with `digits` significant digits; infinities print as inf / -inf
/// and both zeros as 0.
template <class T>
std::string format_number(const T& x, int digits);

/// A labelled table: a heading "label  [rows×cols]", then the rows with their
/// columns aligned. With `row_sums`, each row ends with "| sum".
template <class T>
std::string format_table(const std::string& label, const RefMatrix<T>& m, int digits,
                         bool row_sums = false);

/// The nine tables Q, K, V, R = QKᵀ, S = QKᵀ/√d_k (or ·scale), M, L = (S + M)/τ,
/// A (with its row sums) and O, each with its shape.
template <class T>
std::string format_tables(const Problem& problem, const ReferenceTables<T>& tables, int digits);

struct ExplainOptions {
  int digits = 6;      ///< significant digits printed; also picks the precision
  int64_t batch = 0;   ///< the slice shown
  int64_t head = 0;
};

/// A heading (case name, canonical problem, slice, precision) and the nine
/// tables of the reference for slice (batch, head) of `c`. Validates the case
/// first and throws InvalidInput on bad input or options.
std::string explain(const Case& c, const ExplainOptions& options, const std::string& title = "");

#define ATTNCHECK_EXPLAIN_EXTERN(T)                                                           \
  extern template std::string format_number<T>(const T&, int);                                \
  extern template std::string format_table<T>(const std::string&, const RefMatrix<T>&, int,   \
                                              bool);                                          \
  extern template std::string format_tables<T>(const Problem&, const ReferenceTables<T>&, int);
ATTNCHECK_EXPLAIN_EXTERN(double)
ATTNCHECK_EXPLAIN_EXTERN(long double)
ATTNCHECK_EXPLAIN_EXTERN(mp50)
ATTNCHECK_EXPLAIN_EXTERN(mp100)
#undef ATTNCHECK_EXPLAIN_EXTERN

}  // namespace attncheck
