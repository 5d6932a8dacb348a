"""Node maintenance's act side: the finalizer, releases, cordons and drains in that order,
checked turns, the orphan sweep, the stop that release-nodes sets, and the cluster's nodes out
of service. May import `results`, `passes` and everything below them.
"""
