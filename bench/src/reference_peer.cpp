#include <span>

#include "attncheck/peers.h"
#include "attncheck/reference.h"

namespace attncheck {

void reference_double_attention(const Problem& problem, const float* q, const float* k,
                                const float* v, float* out) {
  validate_problem(problem);
  const Shape& s = problem.shape;
  const std::vector<double> result = reference_attention<double>(
      problem, std::span<const float>(q, static_cast<size_t>(s.q_size())),
      std::span<const float>(k, static_cast<size_t>(s.k_size())),
      std::span<const float>(v, static_cast<size_t>(s.v_size())));
  for (size_t i = 0; i < result.size(); ++i) out[i] = static_cast<float>(result[i]);
}

}  // namespace attncheck
