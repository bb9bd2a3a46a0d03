// Internal to the peers: the vectorised row softmax of the OpenBLAS peer.
#pragma once

#include <cstdint>

namespace attncheck::detail {

/// Row stride (in floats) that softmax_rows needs: n_k rounded up to a whole
/// number of the widest vectors, so that every row is processed in full vectors.
int64_t softmax_stride(int64_t n_k);

/// In place, for each of `rows` rows of `stride` floats: the stable softmax over
/// the row, where -inf marks a masked entry (its weight becomes exactly 0). The
/// padding past n_k must hold -inf. A row with every entry masked becomes all zeros.
void softmax_rows(float* s, int64_t rows, int64_t stride);

}  // namespace attncheck::detail
