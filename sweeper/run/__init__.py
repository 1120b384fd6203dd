"""Running a sweep: Ray Tune executes the trials, Optuna (one study per cell) chooses them. The
only package of Sweeper that imports ray.

Modules: :mod:`~sweeper.run.launch` (one launch of a study), :mod:`~sweeper.run.searcher` (Ray
trials routed to the cells' Optuna studies), :mod:`~sweeper.run.points` (its open points and
cells' counts, and how a finished point is told), :mod:`~sweeper.run.law_plan` (the law sampler's
plan from the stored runs), :mod:`~sweeper.run.trainable` (what runs in a worker), :mod:`~sweeper.run.asha` (per-cell ASHA), :mod:`~sweeper.run.progress` (the display),
:mod:`~sweeper.run.estimate` (a study's cost from a throughput probe, without Ray).
"""

import os

# Tune reads these when it is imported: no per-trial CSV/JSON/TensorBoard files (the storage is the
# record), workers keep the driver's working directory (relative data paths work), and no
# periodic "trial status" table. setdefault: a user's own settings win.
for _k, _v in (
    ("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1"),
    ("RAY_CHDIR_TO_TRIAL_DIR", "0"),
    ("RAY_AIR_NEW_OUTPUT", "0"),
    ("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0"),
):
    os.environ.setdefault(_k, _v)
