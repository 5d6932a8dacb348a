"""Schedules: cron ticks in a time zone, and when a DaemonJob starts a new run (scheduled or
on demand). May import `shared`.
"""
