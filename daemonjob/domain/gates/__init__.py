"""The rollout's gates: what holds new node Jobs back, one module per gate (`hold.py` says
what each answers, `step.py` runs them in their precedence).

May import `results`, `rollout` and everything below them.
"""

from daemonjob.domain.gates.canary import ANNOTATION_PROMOTE
from daemonjob.domain.gates.step import GATES, PRECEDENCE, gate_in_force

__all__ = ["ANNOTATION_PROMOTE", "GATES", "PRECEDENCE", "gate_in_force"]
