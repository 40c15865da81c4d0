"""The jobs on a release (modules are verbs; the estimators they use are nouns in
:mod:`ldpcli.estimators`): the one verified :mod:`~ldpcli.analysis.scan`, :mod:`~ldpcli.analysis.estimate`
(mean, group means), :mod:`~ldpcli.analysis.regress`, :mod:`~ldpcli.analysis.answer` (query workloads)
and :mod:`~ldpcli.analysis.attack` (the reconstruction demonstration)."""
