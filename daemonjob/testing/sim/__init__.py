"""The simulated nodes: a kubelet for many nodes at once (pods, logs, reboots), a stand-in for
the Job controller at scale, their timers, and watches that record what the rollout limits
bound; and for benchmarks, a cluster that exists only as an in-process API server answers it
(`memapi`, `simcluster`, `simjobs`, `simresults`). Sits on the whole package; the test bed's
top (`cluster`, the pytest plugin) uses it.
"""
