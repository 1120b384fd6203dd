"""Sweeper: measure the optimal learning rate and batch size on tiny proxies, fit scaling laws,
and extrapolate them, with intervals and warnings, to a run far too big to sweep."""

__version__ = "0.1.0"
