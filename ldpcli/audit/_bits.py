"""Bit-level events of the privacy lower bound (the audit's ``bits=True``): what the raw doubles show.

The lower bound's ordinary features are rounded to a relative 1e−9 (:mod:`ldpcli.audit._lower_bound`,
step 3), so they see the mechanism's law and not its floating-point rendering. A release is read
by whoever holds the file, bit for bit, and the rendering's low-order bits may depend on the
input (Mironov 2012: the doubles textbook Laplace noise can reach depend on the input). With
``bits`` the lower bound also tries events on these integer labels of each output row z (float64):

- ‖z‖ as an analyst computes it, ``np.linalg.norm(z, axis=1)``: numpy's square root of the sum of
  the squares along the row (``np.add.reduce``, in numpy's own order: left to right for rows of
  fewer than 8 values, its pairwise scheme for longer ones). Its labels: the double itself (its 64 bits), the last ``LOW_BITS`` bits of
  its significand, the number of trailing zero bits of its significand (a value on a coarse binary
  grid has many) and its exponent;
- the row itself, its d doubles bit for bit (d ≤ ``ROW_MAX_D``; a 64-bit hash of the bit patterns,
  so two rows share a label when they are equal, and, with probability ~2⁻⁶⁴, when not);
- the number of coordinates exactly 0, and the fewest trailing zero bits of a coordinate's
  significand (every coordinate on a coarse binary grid, or not);
- for each of the first ``BIT_COORDS`` coordinates z_j: the double itself, the last ``LOW_BITS``
  bits of its significand, and its sign and exponent.

Events. For each label and ordered pair (x, x′) the candidate events are the sets S of label
values, {label(z) ∈ S}, chosen on the first half of the trials, itself split in two. On its first
part the values seen at least ``MIN_CELL`` times (both inputs together) are cells of their own,
the rarer ones one cell "other", and the cells are ordered by (k_x + ½)/(k_x′ + ½). On its second
part the sets of the first j cells, j ≤ ``MAX_SETS``, are scored as every event is
(``log_ratio_bound``), at level α/J for J sets tried. Scoring the sets on the rows that ordered
the cells would favour sets that fit those rows' noise (labels of one law for both inputs, 256
values, 4000 rows each: the best set scored 0.16 to 0.22 on each of 5 seeds), and such a set
would win the choice against an honest threshold event and then fail on the second half. This
is a rule of the choice only: it moves no bound. The best set becomes one more candidate of the
lower bound's choice. The chosen event is a fixed function of z once the first half is seen, and its probabilities are measured on the second
half, which is independent of the choice: the Clopper–Pearson bounds, and so the confidence of
ε_lb, are exactly those of the other events (no correction for the number of labels or sets is
needed, as for the thresholds).

What these events do not see: bits of other computations than the ones listed (a norm summed in
another order, a projection on a secret direction), and patterns spread over many labels. ε_lb is
a lower bound: an event that is not tried is not ruled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ldpcli.errors import counted

#: Low-order significand bits read per value.
LOW_BITS = 8
#: Coordinates whose own bits are labels (the first ones).
BIT_COORDS = 4
#: The whole row is a label for d up to this.
ROW_MAX_D = 64
#: A label value seen fewer times than this in both first halves together joins the cell "other".
MIN_CELL = 5
#: The most cell sets (the first j cells in order of their ratio) scored per label.
MAX_SETS = 4096

_SIGNIFICAND = (1 << 52) - 1
_LOW_MASK = (1 << LOW_BITS) - 1
_FNV_PRIME = np.uint64(0x100000001B3)

#: A set's score from its counts, ``score(k_x, n_x, k_x′, n_x′, J)``: the lower bound's ``log_ratio_bound``
#: at its level divided by J, the number of sets tried.
ScoreFn = Callable[[np.ndarray, int, np.ndarray, int, int], np.ndarray]


def bit_label_names(d: int) -> list[str]:
    """The names of the labels ``bit_labels`` computes for rows of dimension ``d``, in its column order."""
    names = ["‖z‖ as a double", f"the last {LOW_BITS} bits of ‖z‖'s significand",
             "the trailing zero bits of ‖z‖'s significand", "‖z‖'s exponent",
             "the number of coordinates exactly 0", "the fewest trailing zero bits of a coordinate's significand"]
    if d <= ROW_MAX_D:
        names.append("z, its doubles bit for bit")
    for j in range(min(d, BIT_COORDS)):
        names += [f"z[{j}] as a double", f"the last {LOW_BITS} bits of z[{j}]'s significand",
                  f"z[{j}]'s sign and exponent"]
    return names


def _trailing_zeros(bits: np.ndarray) -> np.ndarray:
    """Trailing zero bits of each significand (52 for a zero significand), from int64 bit patterns."""
    sig = bits & _SIGNIFICAND
    low = sig & -sig  # the lowest set bit, a power of two below 2⁵², exact as a double
    return np.where(sig == 0, 52, np.log2(np.maximum(low, 1).astype(np.float64)).astype(np.int64))


def bit_labels(z: np.ndarray) -> np.ndarray:
    """The labels of the module docstring for each row of ``z`` (n × d float64): an (n, F) int64 array."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    n, d = z.shape
    norm = np.linalg.norm(z, axis=1).view(np.int64)
    coords = z.view(np.int64)
    columns = [norm, norm & _LOW_MASK, _trailing_zeros(norm), (norm >> 52) & 0x7FF,
               np.count_nonzero(z == 0.0, axis=1).astype(np.int64),
               # the fewest trailing zeros of a row's significands are those of their bitwise or
               _trailing_zeros(np.bitwise_or.reduce(coords & _SIGNIFICAND, axis=1)) if d
               else np.full(n, 52, dtype=np.int64)]
    if d <= ROW_MAX_D:
        row = np.zeros(n, dtype=np.uint64)
        for j in range(d):  # FNV-1a over the coordinates' bit patterns (wrapping uint64 arithmetic)
            row = (row ^ coords[:, j].view(np.uint64)) * _FNV_PRIME
        columns.append(row.view(np.int64))
    for j in range(min(d, BIT_COORDS)):
        columns += [coords[:, j], coords[:, j] & _LOW_MASK, coords[:, j] >> 52]
    return np.stack(columns, axis=1)


@dataclass
class LabelSet:
    """The event {label ∈ S}: S is ``values``, plus every value outside ``common`` when ``other``."""

    values: np.ndarray  # sorted int64
    common: np.ndarray  # sorted int64: the values that were cells of their own
    other: bool

    def contains(self, labels: np.ndarray) -> np.ndarray:
        """Which of ``labels`` are in the set."""
        inside = np.isin(labels, self.values)
        if self.other:
            inside |= ~np.isin(labels, self.common)
        return inside


def best_label_set(lx: np.ndarray, ly: np.ndarray, score: ScoreFn) -> tuple[float, LabelSet]:
    """The best set of cells for the ordered pair (module docstring) from the first-half labels
    ``lx`` of x and ``ly`` of x′, with ``score`` the lower bound's own score (``ScoreFn``): cells
    ordered on the first part of each, sets scored on the second."""
    ax, bx = np.array_split(lx, 2)
    ay, by = np.array_split(ly, 2)
    values, inverse = np.unique(np.concatenate([ax, ay]), return_inverse=True)
    cx = np.bincount(inverse[: ax.size], minlength=values.size)
    cy = np.bincount(inverse[ax.size:], minlength=values.size)
    common = (cx + cy) >= MIN_CELL
    common_values = values[common]
    n_common = common_values.size
    # cells: the common values, then "other" (index n_common)
    order = np.argsort(-(np.append(cx[common], cx[~common].sum()) + 0.5)
                       / (np.append(cy[common], cy[~common].sum()) + 0.5), kind="stable")[:MAX_SETS]
    scores = score(np.cumsum(_cell_counts(bx, common_values)[order]), bx.size,
                   np.cumsum(_cell_counts(by, common_values)[order]), by.size, order.size)
    best = int(np.argmax(scores))
    chosen = order[: best + 1]
    in_set = np.sort(common_values[chosen[chosen < n_common]])
    return float(scores[best]), LabelSet(in_set, common_values, bool(np.any(chosen == n_common)))


def _cell_counts(labels: np.ndarray, common: np.ndarray) -> np.ndarray:
    """How many of ``labels`` fall in each cell: each value of ``common`` (sorted), then "other"."""
    at = np.minimum(np.searchsorted(common, labels), max(common.size - 1, 0))
    hit = (common[at] == labels) if common.size else np.zeros(labels.size, dtype=bool)
    counts = np.bincount(at[hit], minlength=common.size)
    return np.append(counts, labels.size - int(hit.sum()))


def describe_labels(name: str, labels: LabelSet) -> str:
    """The event in words: the label's name and its set (values shown when there are at most three)."""
    float_label = name.endswith("as a double")
    shown = [repr(float(np.int64(v).view(np.float64))) if float_label else str(int(v)) for v in labels.values[:3]]
    if name.endswith("bit for bit"):  # the labels are hashes, not worth showing
        what = f"one of {counted(labels.values.size, 'row')} seen at least {MIN_CELL} times" if labels.values.size else ""
    elif labels.values.size <= 3:
        what = "in {" + ", ".join(shown) + "}" if labels.values.size else ""
    else:
        what = f"one of {labels.values.size} values ({', '.join(shown)}, …)"
    if labels.other:
        rare = f"a value seen fewer than {MIN_CELL} times in the first half"
        what = f"{what} or {rare}" if what else f"{rare}"
    return f"{name} {what} (raw bits)"
