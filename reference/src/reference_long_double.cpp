// The reference compiled for long double (see reference.h for why one file per type).
#include "reference_impl.hpp"

namespace attncheck {
ATTNCHECK_REFERENCE_INSTANTIATE(long double)
}  // namespace attncheck
