"""Results: what each node's Job ended with, kept after the Job and its pod, grouped by
outcome, in report objects (DaemonJobReport), and what the status says when they cannot be kept.

May import `rollout` and everything below it.
"""
