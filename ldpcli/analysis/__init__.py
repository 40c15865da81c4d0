"""The jobs on a release (modules are verbs; the estimators they use are nouns in
:mod:`ldpcli.estimators`): the one verified :mod:`~ldpcli.analysis._scan`, :mod:`~ldpcli.analysis._estimate`
(mean, group means), :mod:`~ldpcli.analysis._regress`, :mod:`~ldpcli.analysis._answer` (query workloads)
and :mod:`~ldpcli.analysis._attack` (the reconstruction demonstration)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.analysis._answer import QueryAnswers as QueryAnswers
    from ldpcli.analysis._answer import answer_queries as answer_queries
    from ldpcli.analysis._answer import encode_queries as encode_queries
    from ldpcli.analysis._answer import read_workload as read_workload
    from ldpcli.analysis._answer import release_queries as release_queries
    from ldpcli.analysis._attack import AttackReport as AttackReport
    from ldpcli.analysis._attack import attack as attack
    from ldpcli.analysis._estimate import GroupMeans as GroupMeans
    from ldpcli.analysis._estimate import estimate as estimate
    from ldpcli.analysis._estimate import estimate_file_mean as estimate_file_mean
    from ldpcli.analysis._estimate import estimate_group_means as estimate_group_means
    from ldpcli.analysis._estimate import save_group_means as save_group_means
    from ldpcli.analysis._estimate import save_mean as save_mean
    from ldpcli.analysis._regress import RegressionResult as RegressionResult
    from ldpcli.analysis._regress import regress as regress
    from ldpcli.analysis._regress import save_coefficients as save_coefficients
    from ldpcli.analysis._scan import scan as scan

__getattr__, __dir__, __all__ = attach(__name__, __file__)
