#!/usr/bin/env python3
"""PyTorch attention checked through attncheck's subprocess protocol.

    attncheck verify --impl exec:'/usr/bin/python3 adapters/torch/torch_attention.py MODE'

MODE selects the attention path:
  composition-bool      softmax(q @ kᵀ · scale / τ, masked_fill(~allowed, -inf)) @ v
  composition-additive  the same with the mask added as a float tensor of 0 / -inf
  sdpa                  torch.nn.functional.scaled_dot_product_attention (PyTorch >= 2.0;
                        refused with a message on versions that lack it, such as 1.13)
A row whose fp32 logits overflow comes out of PyTorch as NaN (an inf logit)
or, with the additive mask, NaN too where a masked key's +inf logit meets the
-inf mask; the adapter then declines the case (status "unsupported", naming
the row), as DESIGN.md "Range" asks. That decline is the adapter's code, not
PyTorch's.
Debian's python3-torch is not installed by the launcher:
    apt-get install -y python3-torch
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
from attncheck_overflow import decline_non_finite_rows  # noqa: E402
from attncheck_protocol import FEATURES, Unsupported, serve, validate  # noqa: E402

MODES = ("composition-bool", "composition-additive", "sdpa")


def composition(q, k, v, problem, additive):
    allowed = torch.from_numpy(problem.allowed())
    logits = torch.matmul(q, k.transpose(-1, -2)) * problem.scale
    if additive:
        mask = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, float("-inf"))
        logits = logits + mask
    else:
        logits = logits.masked_fill(~allowed, float("-inf"))
    logits = logits / problem.temperature
    weights = torch.softmax(logits, dim=-1)
    # A row with every key masked is NaN after softmax; the zero policy asks for zeros.
    weights = torch.where(allowed.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
    return torch.matmul(weights, v), weights, logits


def sdpa(q, k, v, problem):
    if problem.temperature != 1.0:
        raise Unsupported("scaled_dot_product_attention has no temperature")
    allowed = torch.from_numpy(problem.allowed())
    kwargs = {}
    if "scale" in torch.nn.functional.scaled_dot_product_attention.__doc__:
        kwargs["scale"] = problem.scale
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, **kwargs)
    return torch.where(allowed.any(dim=-1, keepdim=True), out, torch.zeros_like(out)), None, None


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "composition-bool"
    if mode not in MODES:
        sys.exit("torch_attention.py: unknown mode %r (modes: %s)" % (mode, ", ".join(MODES)))
    features = list(FEATURES)
    if mode == "sdpa":
        if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
            sys.exit("torch_attention.py: PyTorch %s has no torch.nn.functional."
                     "scaled_dot_product_attention (added in 2.0)" % torch.__version__)
        features = [f for f in features if f not in ("temperature", "weights")]
        if "scale" not in torch.nn.functional.scaled_dot_product_attention.__doc__:
            features.remove("scale")

    def attention(q, k, v, problem):
        validate(problem, q, k, v)
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        if torch.get_num_threads() != problem.threads:  # as many threads as the caller's
            torch.set_num_threads(problem.threads)
        with problem.compute(), torch.no_grad():  # only this counts as compute time
            if mode == "sdpa":
                out, weights, logits = sdpa(tq, tk, tv, problem)
            else:
                out, weights, logits = composition(tq, tk, tv, problem, mode == "composition-additive")
        decline_non_finite_rows("PyTorch", None if logits is None else logits.numpy(), problem.allowed(),
                                out.numpy(), None if weights is None else weights.numpy())
        if problem.weights:
            return out.numpy(), weights.numpy()
        return out.numpy()

    serve(attention, name="torch-%s-%s" % (torch.__version__, mode), features=features,
          precision="fp32")


if __name__ == "__main__":
    main()
