"""Stage 4, evidence: the held-out transfer check. Predict a cell the law was not fitted on (one of
the sweep's, or a new, larger one), train it there and beside published baselines, and score the
prediction by its regret.

Modules: :mod:`~sweeper.transfer.holdout` (which cells are fitted, which is held out, and a new
cell from its name), :mod:`~sweeper.transfer.plan` (what to train and how to score it: pure
functions on DataFrames), :mod:`~sweeper.transfer.run` (training the held-out cell through the
launch machinery, and the stored results).
"""
