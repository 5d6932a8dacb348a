"""Controller machinery that knows nothing of DaemonJobs, in the manner of client-go.

watch (`informer`), cache (`store`), queue (`workqueue`, `ratelimit`), the API client
(`kube`), time (`clock`), leader election (`leaderelection`), HTTP serving (`serving`)
and the process's memory allocator settings (`malloc`).

The bottom layer: imports only `defaults` of this package, never the domain.
"""
