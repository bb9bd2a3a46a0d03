"""Serve an attention function over attncheck's subprocess protocol.

    from attncheck_protocol import serve, validate

    def attention(q, k, v, problem):        # numpy float32 [batch, heads, rows, dim]
        validate(problem, q, k, v)          # optional: the project's input rules
        ...
        return out                          # [batch, heads, n_q, d_v]

    serve(attention, name="mine", features=["cross", "dv_ne_dk"], precision="fp32")

and check it with  attncheck verify --impl exec:'/usr/bin/python3 mine.py'.
The wire format is described in docs/protocol.md. When the problem asks for
weights (problem.weights), return (out, weights). Raise InvalidInput to reject
an input (the message goes back to attncheck), Unsupported for a case beyond
the range of the precision you claim (an input, logit or sum it cannot hold;
attncheck accepts it only when the case is out of that class's range, and
reports a finding otherwise). Features you do not support are left out of
`features` instead: such problems are never sent. Anything printed to stdout
by the function is redirected to stderr, so it cannot corrupt the protocol.

Each "ok" reply carries compute_seconds: by default the time of the whole
call of the function; wrap the computation itself in `with problem.compute():`
to leave validation and conversions out of it.
"""

import contextlib
import json
import sys
import time
import traceback

import numpy as np

ABI_VERSION = 1

FEATURES = (
    "cross", "dv_ne_dk", "batch_heads", "scale", "temperature", "causal_top_left",
    "causal_bottom_right", "key_padding", "explicit_mask", "empty_row_reject",
    "empty_row_zero", "weights",
)
MASK_KINDS = ("none", "causal_top_left", "causal_bottom_right", "explicit")


class InvalidInput(Exception):
    """The input breaks the rules of the problem (sent back as status "invalid")."""


class Unsupported(Exception):
    """The case is beyond the range of the claimed precision class (sent back
    as status "unsupported"; accepted only for cases out of that range)."""


class Problem:
    """One case's header: sizes, scale, temperature, masks, empty-row policy.

    mask is None or a bool array [mask_batch, mask_heads, n_q, n_k] (True =
    allowed, a leading 1 broadcasts); key_lengths is None or an int64 array
    [batch]; mask_kind is one of MASK_KINDS.
    """

    def __init__(self, header):
        for key in ("batch", "heads", "n_q", "n_k", "d_k", "d_v", "mask_batch", "mask_heads"):
            setattr(self, key, int(header[key]))
        self.id = header["id"]
        self.scale = float(header["scale"])
        self.temperature = float(header["temperature"])
        self.mask_kind = header["mask_kind"]
        if self.mask_kind not in MASK_KINDS:
            raise ValueError("unknown mask_kind %r" % self.mask_kind)
        lengths = header.get("key_lengths")
        self.key_lengths = None if lengths is None else np.asarray(lengths, dtype=np.int64)
        self.empty_row_policy = header["empty_row_policy"]
        self.weights = bool(header.get("weights", False))
        # The threads the caller asked for (bench --threads): a hint, 1 when absent.
        self.threads = max(1, int(header.get("threads", 1)))
        self.mask = None
        self.compute_seconds = None

    @contextlib.contextmanager
    def compute(self):
        """Times the block as (part of) this case's compute_seconds, sent in
        the reply; without it the whole call of the function is timed."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.compute_seconds = (self.compute_seconds or 0.0) + time.perf_counter() - start

    def allowed(self):
        """Bool array [batch, heads, n_q, n_k]: where query i may read key j,
        with the causal rule, the key lengths and the explicit mask combined."""
        i = np.arange(self.n_q)[:, None]
        j = np.arange(self.n_k)[None, :]
        ok = np.ones((self.n_q, self.n_k), dtype=bool)
        if self.mask_kind == "causal_top_left":
            ok = j <= i
        elif self.mask_kind == "causal_bottom_right":
            ok = j <= i + (self.n_k - self.n_q)
        ok = np.broadcast_to(ok, (self.batch, self.heads, self.n_q, self.n_k))
        if self.mask is not None:
            ok = ok & self.mask
        if self.key_lengths is not None:
            ok = ok & (np.arange(self.n_k)[None, None, None, :]
                       < self.key_lengths[:, None, None, None])
        return np.array(np.broadcast_to(ok, (self.batch, self.heads, self.n_q, self.n_k)))


def validate(problem, q, k, v):
    """Raises InvalidInput like attncheck's own implementations: non-finite
    inputs, scale or temperature not finite and positive, key lengths outside
    [0, n_k], and empty rows under the reject policy."""
    for name, x in (("Q", q), ("K", k), ("V", v)):
        bad = np.argwhere(~np.isfinite(x))
        if len(bad):
            b, h, r, c = bad[0]
            raise InvalidInput("%s[b=%d][h=%d][row=%d][col=%d] is not finite" % (name, b, h, r, c))
    for name, x in (("scale", problem.scale), ("temperature", problem.temperature)):
        if not (np.isfinite(x) and x > 0):
            raise InvalidInput("%s is %r; it must be finite and > 0" % (name, x))
    if problem.key_lengths is not None:
        bad = np.argwhere((problem.key_lengths < 0) | (problem.key_lengths > problem.n_k))
        if len(bad):
            raise InvalidInput("key_lengths[%d] is outside [0, n_k]" % bad[0][0])
    if problem.empty_row_policy == "reject":
        empty = np.argwhere(~problem.allowed().any(axis=-1))
        if len(empty):
            b, h, i = empty[0]
            raise InvalidInput("empty row: every key is masked for b=%d h=%d row=%d" % (b, h, i))


def _read_exact(stream, count):
    data = stream.read(count)
    if data is None or len(data) != count:
        raise EOFError("input ended inside a payload")
    return data


def _tensor(stream, shape):
    count = int(np.prod(shape))
    return np.frombuffer(_read_exact(stream, 4 * count), dtype="<f4").reshape(shape).astype(np.float32)


def _write(stream, header, payloads=()):
    stream.write((json.dumps(header) + "\n").encode())
    for p in payloads:
        stream.write(p)
    stream.flush()


def _as_output(x, shape, what):
    x = np.asarray(x, dtype=np.float32)
    if x.shape != tuple(shape):
        raise ValueError("%s has shape %s; expected %s" % (what, x.shape, tuple(shape)))
    return np.ascontiguousarray(x, dtype="<f4").tobytes()


def serve(attention, name, features, precision="fp32"):
    """Answers cases on stdin/stdout until stdin ends."""
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError("unknown features %s (known: %s)" % (unknown, ", ".join(FEATURES)))
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    _write(out, {"abi_version": ABI_VERSION, "name": name, "features": list(features),
                 "precision": precision})
    while True:
        line = inp.readline()
        if not line:
            return
        header = json.loads(line)
        problem = Problem(header)
        b, h = problem.batch, problem.heads
        q = _tensor(inp, (b, h, problem.n_q, problem.d_k))
        k = _tensor(inp, (b, h, problem.n_k, problem.d_k))
        v = _tensor(inp, (b, h, problem.n_k, problem.d_v))
        if problem.mask_kind == "explicit":
            shape = (problem.mask_batch, problem.mask_heads, problem.n_q, problem.n_k)
            raw = _read_exact(inp, int(np.prod(shape)))
            problem.mask = np.frombuffer(raw, dtype=np.uint8).reshape(shape) != 0
        reply = {"id": problem.id}
        try:
            start = time.perf_counter()
            result = attention(q, k, v, problem)
            elapsed = time.perf_counter() - start
            payloads = []
            if problem.weights:
                o, w = result
                payloads = [_as_output(o, (b, h, problem.n_q, problem.d_v), "out"),
                            _as_output(w, (b, h, problem.n_q, problem.n_k), "weights")]
            else:
                payloads = [_as_output(result, (b, h, problem.n_q, problem.d_v), "out")]
            reply["status"] = "ok"
            reply["compute_seconds"] = elapsed if problem.compute_seconds is None else problem.compute_seconds
            _write(out, reply, payloads)
        except InvalidInput as e:
            _write(out, dict(reply, status="invalid", message=str(e)))
        except Unsupported as e:
            _write(out, dict(reply, status="unsupported", message=str(e)))
        except Exception as e:  # the function's own failure, reported, not fatal
            traceback.print_exc(file=sys.stderr)
            _write(out, dict(reply, status="error", message="%s: %s" % (type(e).__name__, e)))
