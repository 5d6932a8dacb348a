"""Controller machinery that knows nothing of DaemonJobs, in the manner of client-go.

Sub-packages, top to bottom (pyproject.toml's contract): `cache` (informers, the indexed
store, frozen objects: tools/cache) beside `server` (the HTTP endpoints: metrics, probes, the
webhook's TLS server); `queue` (work queues and rate limiters: util/workqueue); `process`
(clock, leader election, the process's own settings and metrics); `client` (the API client).
The bottom layer: imports only `defaults` of this package, never the domain.
"""
