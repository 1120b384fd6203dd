"""Stage 4, reports: the PNG plots (:mod:`~sweeper.report.plots`) and the self-contained HTML page
(:mod:`~sweeper.report.page`) of a sweep, its laws and its transfer checks
(:mod:`sweeper.transfer`)."""
