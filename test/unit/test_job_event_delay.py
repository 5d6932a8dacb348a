from daemonjob import defaults
from daemonjob.controller.wiring.controller import job_event_delay


def test_small_decisions_use_the_base_delay():
    assert job_event_delay(0.0) == defaults.JOB_EVENT_DELAY
    assert job_event_delay(0.01) == defaults.JOB_EVENT_DELAY


def test_costly_decisions_are_batched_longer_up_to_a_cap():
    cost = 0.08  # e.g. tens of thousands of nodes
    assert job_event_delay(cost) == cost * defaults.JOB_EVENT_COST_FACTOR > defaults.JOB_EVENT_DELAY
    assert job_event_delay(10.0) == defaults.JOB_EVENT_DELAY_MAX
