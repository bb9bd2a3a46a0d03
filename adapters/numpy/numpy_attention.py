#!/usr/bin/env python3
"""NumPy attention checked through attncheck's subprocess protocol:
softmax((q @ kᵀ) · scale + mask) / τ) @ v in float32, row max subtracted.

A row whose fp32 logits overflow comes out of NumPy as NaN (an inf logit) or
zeros (every readable logit -inf); the adapter then declines the case
(status "unsupported", naming the row), as DESIGN.md "Range" asks. That
decline is the adapter's code, not NumPy's.

    attncheck verify --impl exec:'/usr/bin/python3 adapters/numpy/numpy_attention.py'
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import numpy as np  # noqa: E402
from attncheck_overflow import decline_non_finite_rows  # noqa: E402
from attncheck_protocol import FEATURES, serve, validate  # noqa: E402


def attention(q, k, v, problem):
    validate(problem, q, k, v)
    allowed = problem.allowed()
    # Only the computation counts as compute time (problem.compute()).
    with problem.compute(), np.errstate(over="ignore", invalid="ignore"):  # overflow: checked below
        logits = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(problem.scale)
        logits = np.where(allowed, logits, np.float32(-np.inf)) / np.float32(problem.temperature)
        row_max = logits.max(axis=-1, keepdims=True)
        row_max = np.where(np.isfinite(row_max), row_max, np.float32(0))
        e = np.exp(logits - row_max)  # exp(-inf) = 0 for masked keys
        total = e.sum(axis=-1, keepdims=True)
        weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)  # empty rows: zeros
        out = np.matmul(weights, v)
    decline_non_finite_rows("NumPy", logits, allowed, out, weights)
    return (out, weights) if problem.weights else out


if __name__ == "__main__":
    serve(attention, name="numpy-" + np.__version__, features=FEATURES, precision="fp32")
