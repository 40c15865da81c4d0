"""What a release risks: reconstruction bounds for a released ε.

Bhowmick et al. 2018 Sec. 2.3: an ε-LDP release multiplies the prior's chance of reconstructing a
person's data by at most e^ε (Lemma 2.2), so a diffuse prior keeps reconstruction unlikely even at
large ε. ``diffuse`` (Sec. 2.3.1, Prop. 1) and ``sparse`` (Sec. 2.3.2, Lemma 2.3, Prop. 2) compute
those bounds, with a verdict at a threshold, and ``section`` states them for a release (the
``reconstruction`` section of every sidecar). ``cosine`` gives the natural reconstruction's expected
cosine for a boundary row, exactly per mechanism (the near-exact warning of
:mod:`ldpcli.release._safety`). The attack demonstration is a job on a release
(:mod:`ldpcli.analysis._attack`); choosing ε from an error target is planning
(:mod:`ldpcli.planning._solvers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.risk._cosine import ExpectedCosine as ExpectedCosine
    from ldpcli.risk._cosine import expected_cosine as expected_cosine
    from ldpcli.risk._diffuse import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
    from ldpcli.risk._diffuse import diffuse_risk as diffuse_risk
    from ldpcli.risk._diffuse import max_epsilon_for_risk as max_epsilon_for_risk
    from ldpcli.risk._section import reconstruction as reconstruction
    from ldpcli.risk._section import reconstruction_for as reconstruction_for
    from ldpcli.risk._sparse import sparse_risk as sparse_risk

__getattr__, __dir__, __all__ = attach(__name__, __file__)
