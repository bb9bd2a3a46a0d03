// The reference compiled for mp100 (see reference.h for why one file per type).
#include "reference_impl.hpp"

namespace attncheck {
ATTNCHECK_REFERENCE_INSTANTIATE(mp100)
}  // namespace attncheck
