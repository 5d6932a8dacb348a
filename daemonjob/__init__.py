"""DaemonJob: run a Job on every eligible node of a Kubernetes cluster."""

__version__ = "0.1.0"
