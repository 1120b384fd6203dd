"""ASHA with one bracket per cell: losses of different cells are not comparable."""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

from sweeper.run.trainable import METRIC, USER_ERROR

__all__ = ["PerCellASHA"]


class PerCellASHA(FIFOScheduler):
    """One ASHA bracket per cell: losses of different cells are not comparable, so a w16 trial
    must never be stopped because a w64 trial reached a lower loss at the same rung."""

    def __init__(self, cell_names: list[str], *, grace: float, reduction_factor: float) -> None:
        super().__init__()
        self._metric = METRIC
        # decide on every report as it arrives (buffered results would delay the stop)
        self._supports_buffered_results = False
        self._by_cell = {
            c: ASHAScheduler(
                time_attr="progress",
                metric=METRIC,
                mode="min",
                max_t=100,
                grace_period=max(1, round(100 * grace)),
                reduction_factor=reduction_factor,
            )
            for c in cell_names
        }

    def _of(self, trial: Any) -> ASHAScheduler:
        return self._by_cell[trial.config["cell"]]

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return True

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if result.get("final"):
            return TrialScheduler.CONTINUE  # the run is over; let it end as COMPLETE
        return self._of(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if result.get(USER_ERROR):  # the run failed in the study's code: no loss for a rung
            self.on_trial_error(tune_controller, trial)
            return
        self._of(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._of(trial).on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        sched = self._of(trial)
        sched._trial_info.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return "\n".join(f"{c}: {s.debug_string()}" for c, s in self._by_cell.items())
