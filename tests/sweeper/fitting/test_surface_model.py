"""The surface model's pieces (sweeper.fitting._surface_model) on hand-made inputs."""

from __future__ import annotations


def test_reml_tau_survives_a_law_whose_slope_is_not_determined() -> None:
    """Cells at one scale (the design's slope column constant): the REML criterion is undefined
    there, not an exception (a law-sampler replay crashed with LinAlgError on such a fit)."""
    import numpy as np

    from sweeper.fitting import _surface_model as sm

    x = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    tau = sm.reml_tau(np.array([0.1, 0.2, 0.3]), 0.01 * np.eye(3), x)
    assert tau == 0.0
