"""Stage 1, a study and its runs: the study file (spec, ladder, search space), the storage, the
lease that keeps one driver per sweep, the Optuna studies of a launched sweep, imported runs, and
the canonical runs table every later stage reads.

Modules: :mod:`~sweeper.study.spec` (study files), :mod:`~sweeper.study.ladder` (cells),
:mod:`~sweeper.study.space` (search space), :mod:`~sweeper.study.storage` (tables, URLs),
:mod:`~sweeper.study.lease`, :mod:`~sweeper.study.sweep` (a launched sweep's cell studies),
:mod:`~sweeper.study.importer` (runs published by others), :mod:`~sweeper.study.runs` (columns).
"""
