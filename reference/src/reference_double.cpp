// The reference compiled for double (see reference.h for why one file per type).
#include "reference_impl.hpp"

namespace attncheck {
ATTNCHECK_REFERENCE_INSTANTIATE(double)
}  // namespace attncheck
