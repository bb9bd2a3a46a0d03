// The reference compiled for mp50 (see reference.h for why one file per type).
#include "reference_impl.hpp"

namespace attncheck {
ATTNCHECK_REFERENCE_INSTANTIATE(mp50)
}  // namespace attncheck
