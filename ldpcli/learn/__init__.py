"""Private learning: the losses (:mod:`~ldpcli.learn._losses`) and locally private stochastic
gradient and mirror descent (:mod:`~ldpcli.learn._sgd`). :mod:`ldpcli.learn._train` reads the data and
writes the model; nothing here touches files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ldpcli._lazy import attach

if TYPE_CHECKING:
    from ldpcli.learn._accounting import central_epsilon as central_epsilon
    from ldpcli.learn._central import CentralOptions as CentralOptions
    from ldpcli.learn._central import central_steps as central_steps
    from ldpcli.learn._central import poisson_schedule as poisson_schedule
    from ldpcli.learn._losses import make_loss as make_loss
    from ldpcli.learn._reference import empirical_minimizer as empirical_minimizer
    from ldpcli.learn._sgd import DEFAULT_MECHANISM as DEFAULT_MECHANISM
    from ldpcli.learn._sgd import EuclideanIterate as EuclideanIterate
    from ldpcli.learn._sgd import StepRule as StepRule
    from ldpcli.learn._sgd import default_step_rule as default_step_rule
    from ldpcli.learn._sgd import sgd_pass as sgd_pass
    from ldpcli.learn._train import TrainingOptions as TrainingOptions
    from ldpcli.learn._train import train as train

__getattr__, __dir__, __all__ = attach(__name__, __file__)
