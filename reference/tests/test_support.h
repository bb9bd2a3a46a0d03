// Small builders shared by the reference tests.
#pragma once

#include <cstdint>
#include <vector>

#include "attncheck/problem.h"

namespace attncheck::test {

inline Problem problem_of(Shape s) {
  Problem p;
  p.shape = s;
  return p;
}

// Deterministic, exactly representable, slice-dependent values in [-2, 2].
inline std::vector<float> pattern(int64_t size, int salt) {
  std::vector<float> x(static_cast<size_t>(size));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(salt) * 13) % 17) - 8) / 4;
  return x;
}

struct Tensors {
  std::vector<float> q, k, v;
  explicit Tensors(const Shape& s, int salt = 0)
      : q(pattern(s.q_size(), salt)), k(pattern(s.k_size(), salt + 1)), v(pattern(s.v_size(), salt + 2)) {}
};

}  // namespace attncheck::test
