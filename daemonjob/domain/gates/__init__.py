"""The rollout's gates: what holds new node Jobs back, one module per gate (`hold.py` says
what each is asked, `step.py` runs them in their precedence), and what another DaemonJob's
gate in force means to the order across DaemonJobs (`orderview.py`).

May import `results`, `rollout` and everything below them.
"""

from daemonjob.domain.gates.step import GATES, PRECEDENCE, gate_in_force

__all__ = ["GATES", "PRECEDENCE", "gate_in_force"]
