"""Private learning: the losses (:mod:`~ldpcli.learn.losses`) and locally private stochastic
gradient and mirror descent (:mod:`~ldpcli.learn.sgd`). :mod:`ldpcli.learn.train` reads the data and
writes the model; nothing here touches files.
"""
