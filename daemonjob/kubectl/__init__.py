"""The `kubectl daemonjob` plugin: per-node status, logs, re-runs and ad-hoc DaemonJobs.

Sits on the domain and the machinery, beside the controller and admission (whose rules and
settings it reads); no entry point below it imports it.
"""
