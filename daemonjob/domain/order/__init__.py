"""Order across the DaemonJobs of a namespace: spec.exclusionGroup and spec.after, and one
DaemonJob's `OrderInput` composed from what the others show. May import `spec` and below.
"""
