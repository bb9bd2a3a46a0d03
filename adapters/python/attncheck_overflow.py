"""The adapters' own honest decline for rows whose fp32 logits or output overflow.

DESIGN.md "Range": an fp32 implementation either computes a row whose logits
fp32 cannot hold correctly, or rejects it naming the row; it never returns
zeros or NaN for it. NumPy, PyTorch and oneDNN return NaN (or zeros) for such
rows, so each adapter checks what the library computed and declines:

    decline_non_finite_rows("NumPy", logits, allowed, out)

raises attncheck_protocol.Unsupported (status "unsupported") naming the first
row [b][h][i], in batch, head, row order, that has a readable key and
  - a readable key whose logit is +inf or NaN (the softmax then gives NaN), or
  - readable logits that are all -inf (the row then comes back as zeros), or
  - a non-finite output (or weight).
A readable logit of -inf beside a finite one is not declined: its weight is
exactly 0 in fp32 either way (its exact logit lies below −3.4e38, far below
the finite maximum), so the row is computed correctly. The decline is the
adapter's, not the library's: the message says what the library returned.
"""

import numpy as np

from attncheck_protocol import Unsupported


def _returned(row):
    if not np.isfinite(row).all():
        return "NaN" if np.isnan(row).any() else "inf"
    return "zeros" if not row.any() else "finite values"


def decline_non_finite_rows(library, logits, allowed, out, weights=None):
    """logits: float32 [batch, heads, n_q, n_k], what the library's softmax was
    given (masked entries included, as the library holds them), or None where
    the library does not expose them; allowed: bool,
    same shape; out: [batch, heads, n_q, d_v]; weights: None or like logits.
    Returns None when every row with a readable key is finite."""
    allowed, out = np.asarray(allowed), np.asarray(out)
    # Without the logits (a fused entry that hides them) only the output is checked.
    logits = np.zeros(allowed.shape, np.float32) if logits is None else np.asarray(logits)
    nonempty = allowed.any(axis=-1)
    with np.errstate(invalid="ignore"):
        up = allowed & (np.isnan(logits) | (logits == np.inf))  # +inf or NaN: the row's softmax is NaN
    all_down = nonempty & ~(allowed & (logits != -np.inf)).any(axis=-1)  # every readable logit is -inf
    bad_logit = up.any(axis=-1) | all_down
    bad_out = ~np.isfinite(out).all(axis=-1)
    if weights is not None:
        bad_out |= ~np.isfinite(np.asarray(weights)).all(axis=-1)
    rows = np.argwhere(nonempty & (bad_logit | bad_out))
    if not len(rows):
        return
    b, h, i = (int(x) for x in rows[0])
    where = "row [%d][%d][%d]" % (b, h, i)
    got = _returned(out[b, h, i])
    if bad_logit[b, h, i]:
        line = logits[b, h, i]
        readable = int(allowed[b, h, i].sum())
        if all_down[b, h, i]:
            j = int(np.argwhere(allowed[b, h, i])[0][0])
            what = "every readable logit overflows to -inf (%d keys; the first is key %d)" % (readable, j)
        else:
            j = int(np.argwhere(up[b, h, i])[0][0])
            infinite = int((allowed[b, h, i] & ~np.isfinite(line)).sum())
            what = "the fp32 logit of readable key %d is %s (%d of the row's %d readable logits are not finite)" % (
                j, line[j], infinite, readable)
        raise Unsupported("%s: %s; %s returns %s for this row, so the adapter declines it"
                          % (where, what, library, got))
    # Every readable logit is finite: say why the output is not.
    masked_bad = np.argwhere(~allowed[b, h, i] & np.isnan(logits[b, h, i]))
    if len(masked_bad):
        raise Unsupported(
            "%s: every readable logit is finite, but masked key %d's logit is NaN (its overflowing logit plus "
            "the additive -inf mask) and %s returns %s for this row, so the adapter declines it"
            % (where, int(masked_bad[0][0]), library, got))
    c = int(np.argwhere(~np.isfinite(out[b, h, i]))[0][0]) if not np.isfinite(out[b, h, i]).all() else -1
    what = ("O column %d is %s (the weighted sum of V overflows fp32)" % (c, out[b, h, i, c]) if c >= 0
            else "a weight is not finite")
    raise Unsupported("%s: every readable logit is finite, but %s; %s returns %s for this row, so the adapter "
                      "declines it" % (where, what, library, got))
