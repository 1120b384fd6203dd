"""Stage 4, evidence and reports: the held-out transfer check (:mod:`~sweeper.report.transfer`)
and the PNG/HTML report (:mod:`~sweeper.report.page`)."""
