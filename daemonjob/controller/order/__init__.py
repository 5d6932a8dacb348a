"""The order across DaemonJobs as the caches show it: the index of exclusion groups and
`after`, claims not yet in the cache, where Jobs succeeded, and which DaemonJobs an event wakes.
May import `runtime`.
"""
