"""Reaching the cluster as kubectl does: its global flags, the connection, the exit statuses, the shared reads.

May import the formats (durations are read kubectl's way); never the views, the commands or the
arguments above it.
"""
