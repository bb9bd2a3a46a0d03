#!/usr/bin/env python3
"""Children for the exec: client's tests, one behaviour per MODE argument:
ok (a correct numpy attention), die, crash, hang, garbage, truncate,
truncate_hang, no_handshake, bad_handshake, wrong_version, unknown_feature,
invalid, chatty (prints to stdout from inside the function), unsupported
(declines any case whose Q holds a value beyond 1000), close_channel (closes
its standard input and output, then sleeps), bad_compute_seconds (replies
with compute_seconds -1), nan (answers NaN everywhere), threads (answers the
case's "threads" field in every element of the output)."""
import os
import signal
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "adapters", "python"))
sys.path.insert(0, os.path.join(here, "..", "..", "adapters", "numpy"))

import numpy as np  # noqa: E402
import attncheck_protocol as proto  # noqa: E402
from numpy_attention import attention as numpy_attention  # noqa: E402

mode = sys.argv[1]
raw = sys.stdout.buffer


def hello(**override):
    import json
    fields = {"abi_version": 1, "name": "child-" + mode, "features": list(proto.FEATURES),
              "precision": "fp32"}
    fields.update(override)
    raw.write((json.dumps(fields) + "\n").encode())
    raw.flush()


if mode == "no_handshake":
    time.sleep(3600)
if mode == "bad_handshake":
    raw.write(b"hello there\n")
    raw.flush()
    time.sleep(3600)
if mode == "wrong_version":
    hello(abi_version=7)
    time.sleep(3600)
if mode == "unknown_feature":
    hello(features=["cross", "flash"])
    time.sleep(3600)


def attention(q, k, v, problem):
    if mode == "die":
        os._exit(3)
    if mode == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(3600)
    if mode == "garbage":
        raw.write(b"\x00\x01 this is not json\n")
        raw.flush()
        time.sleep(3600)
    if mode in ("truncate", "truncate_hang"):
        raw.write(b'{"id": %d, "status": "ok"}\n' % problem.id)
        raw.write(b"\x00" * 6)
        raw.flush()
        if mode == "truncate":
            os._exit(0)
        time.sleep(3600)
    if mode == "close_channel":
        os.close(0)
        os.close(1)
        time.sleep(3600)
    if mode == "bad_compute_seconds":
        raw.write(b'{"id": %d, "status": "ok", "compute_seconds": -1}\n' % problem.id)
        raw.write(np.zeros((problem.batch, problem.heads, problem.n_q, problem.d_v), "<f4").tobytes())
        raw.flush()
        time.sleep(3600)
    if mode == "invalid":
        raise proto.InvalidInput("no thanks: Q is too small")
    if mode == "unsupported" and np.abs(q).max() > 1000:
        raise proto.Unsupported("Q holds %g, beyond what I hold" % np.abs(q).max())
    if mode == "nan":
        b, h = problem.batch, problem.heads
        out = np.full((b, h, problem.n_q, problem.d_v), np.nan, np.float32)
        return (out, np.full((b, h, problem.n_q, problem.n_k), np.nan, np.float32)) if problem.weights else out
    if mode == "threads":
        return np.full((problem.batch, problem.heads, problem.n_q, problem.d_v), problem.threads, np.float32)
    if mode == "chatty":
        print("a stray print from inside the function")
    return numpy_attention(q, k, v, problem)


proto.serve(attention, name="child-" + mode, features=proto.FEATURES)
