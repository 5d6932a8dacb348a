"""A pass over one DaemonJob, step by step: observe, adopt, act, history cleanup, report, the
self-check of the kept plan, what the API told it (troubles), and stuck starts and alerts read for
the decision. May import `metrics`, `order` and `runtime`.
"""
