"""The `kubectl daemonjob` plugin: per-node status, logs, re-runs and ad-hoc DaemonJobs."""
