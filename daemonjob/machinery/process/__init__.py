"""The process: injectable time, leader election on a Lease, which pod this is, glibc malloc
settings and the process's own metrics. May import `client`.
"""
