"""DeepSpeed 0.19.8: the ``deepspeed`` export read by ``deepspeed.runtime.config.DeepSpeedConfig``.

DeepSpeedConfig resolves the batch triple (``_configure_train_batch_size``: train_batch_size =
micro × accumulation × data-parallel world, any two of them given) for the data-parallel world
of the ``mpu`` it is handed: the check hands it an mpu of the recipe's data-parallel size over a
one-process gloo group (a file store, no network). The LR comes from DeepSpeed's own scheduler
class named in the file (``deepspeed.runtime.lr_schedules``, e.g. WarmupCosineLR) built from the
file's ``scheduler.params`` on a torch AdamW with the file's ``optimizer.params``, at the
iteration the engine has it at for optimizer step k: built at -1 (``_configure_lr_scheduler``),
stepped after each optimizer step (``_take_model_step``), so k − 1.

DeepSpeed's communication backend JIT-compiles a CPU shared-memory all-reduce op
(``deepspeed_shm_comm``, minutes on 2 cores) when it starts on a CPU; the config loader does not
use it, so the check marks that op incompatible before starting the backend.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from common import View, lr_points

_DIST_READY = False


class _MPU:
    """The model-parallel unit interface DeepSpeedConfig reads the data-parallel size from."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0

    def get_model_parallel_world_size(self) -> int:
        return 1

    def get_model_parallel_rank(self) -> int:
        return 0


def _init_dist() -> None:
    global _DIST_READY
    if _DIST_READY:
        return
    import deepspeed
    import deepspeed.ops
    import torch.distributed as tdist

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    if not tdist.is_initialized():
        store = tempfile.mktemp(prefix="ds-check-store-")
        tdist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    _DIST_READY = True


def load(text: str, recipe: dict[str, Any]) -> View:
    from importlib.metadata import version

    import torch
    from deepspeed.runtime import lr_schedules
    from deepspeed.runtime.config import DeepSpeedConfig

    view = View(
        framework=f"deepspeed {version('deepspeed')}",
        loader="deepspeed.runtime.config.DeepSpeedConfig",
    )
    _init_dist()
    dp = int(recipe["data_parallel"])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ds_config.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        cfg = DeepSpeedConfig(path, mpu=_MPU(dp))
    view.data_parallel = cfg.world_size
    view.global_batch = cfg.train_batch_size
    view.micro_batch = cfg.train_micro_batch_size_per_gpu
    view.grad_accum = cfg.gradient_accumulation_steps
    view.grad_clip = cfg.gradient_clipping
    view.zero_stage = cfg.zero_optimization_stage
    bf16 = getattr(getattr(cfg, "bfloat16_config", None), "enabled", None)
    if bf16 is None:
        bf16 = getattr(cfg, "bfloat16_enabled", False)
    fp16 = getattr(cfg, "fp16_enabled", False)
    view.precision = "bf16" if bf16 else ("fp16" if fp16 else "fp32")
    # the model is the user's (standard parametrization unless its code says otherwise)
    view.parametrization = "sp"
    params = dict(cfg.optimizer_params or {})
    if cfg.optimizer_name:
        view.peak_lr = params.get("lr")
        betas = params.get("betas")
        if betas is not None:
            view.beta1, view.beta2 = float(betas[0]), float(betas[1])
        view.eps = params.get("eps")
        view.weight_decay = params.get("weight_decay")
        view.notes.append(f"optimizer {cfg.optimizer_name}")
    if cfg.scheduler_name and view.peak_lr is not None:
        sched_cls = getattr(lr_schedules, cfg.scheduler_name)
        sp = dict(cfg.scheduler_params or {})
        for k, step in lr_points(recipe).items():
            opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=view.peak_lr)
            sch = sched_cls(opt, **sp)
            if step > 0:
                sch.step(step - 1)  # last_batch_iteration = step - 1: the LR step `step` runs at
            setattr(view, k, float(opt.param_groups[0]["lr"]))
        total = sp.get("total_num_steps")
        view.total_steps = int(total) if total is not None else None
        if "cos_min_ratio" in sp:
            view.min_lr = float(sp["cos_min_ratio"]) * view.peak_lr
        elif cfg.scheduler_name == "WarmupDecayLR":  # decays to warmup_min_lr (default 0)
            view.min_lr = float(sp.get("warmup_min_lr", 0.0))
        elif cfg.scheduler_name == "WarmupLR":  # no decay
            view.min_lr = float(sp.get("warmup_max_lr") or view.peak_lr)
        view.notes.append(f"scheduler {cfg.scheduler_name} {sp}")
    return view
