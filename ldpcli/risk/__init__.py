"""What a release risks: reconstruction bounds for a released ε.

Bhowmick et al. 2018 Sec. 2.3: an ε-LDP release multiplies the prior's chance of reconstructing a
person's data by at most e^ε (Lemma 2.2), so a diffuse prior keeps reconstruction unlikely even at
large ε. ``diffuse`` (Sec. 2.3.1, Prop. 1) and ``sparse`` (Sec. 2.3.2, Lemma 2.3, Prop. 2) compute
those bounds, with a verdict at a threshold, and ``section`` states them for a release (the
``reconstruction`` section of every sidecar). ``cosine`` gives the natural reconstruction's expected
cosine for a boundary row, exactly per mechanism (the near-exact warning of
:mod:`ldpcli.release.safety`). The attack demonstration is a job on a release
(:mod:`ldpcli.analysis.attack`); choosing ε from an error target is planning
(:mod:`ldpcli.planning.solvers`).
"""
