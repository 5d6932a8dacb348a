"""The simulated nodes: a kubelet for many nodes at once (pods, logs, reboots), a stand-in for
the Job controller at scale, their timers, and watches that record what the rollout limits
bound. Sits on the whole package; the test bed's top (`cluster`, the pytest plugin) uses it.
"""
