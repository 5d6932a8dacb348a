"""The controller's Prometheus metrics, one registry per controller instance, and the
per-DaemonJob series (health, gates, the rate limiter). May import `runtime`.
"""
