"""The `kubectl daemonjob` plugin: per-node status, logs, re-runs and ad-hoc DaemonJobs.

Sits on the domain and the machinery, beside the controller and admission (whose rules and
settings it reads); no entry point below it imports it. Inside, top to bottom: the entry points
(cli.py, complete.py, commandtable.py), the arguments (args), the commands, then the cluster
reads and the per-node views side by side, and the text formats at the bottom.
"""
