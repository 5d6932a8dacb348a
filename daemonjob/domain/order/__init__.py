"""Order across the DaemonJobs of a namespace: spec.exclusionGroup and spec.after, their
reasons and the `OrderInput` the order gate reads (composed in gates/orderview.py, which reads
the others' gate in force). May import `spec` and below.
"""
