"""What a run records and how it is read back: the tag and metric names and the typed figures
(recorded.py, figures.py), a rank's report to its job (reports.py), the step-time statistics
(stats.py), and the one reader of a logged run (run_result.py, logged_spec.py).

Leaves: every layer may import them, and they import nothing of gpubench but each other and
src/errors.py."""
