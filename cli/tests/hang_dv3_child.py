#!/usr/bin/env python3
"""An exec: child that is correct except that it hangs (spins forever) on any
problem with d_v = 3: verify must stay fast and shrink towards d_v = 3."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "adapters", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "adapters", "numpy"))

import attncheck_protocol as proto  # noqa: E402
from numpy_attention import attention as numpy_attention  # noqa: E402


def attention(q, k, v, problem):
    if problem.d_v == 3:
        while True:
            pass
    return numpy_attention(q, k, v, problem)


proto.serve(attention, name="hangs-on-dv3", features=proto.FEATURES)
