"""The process: injectable time, leader election on a Lease (and the Lease records it writes),
which pod this is, glibc malloc settings and the process's own metrics. May import `client`.
"""
