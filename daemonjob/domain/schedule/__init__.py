"""Schedules: cron ticks in a time zone, the schedule fields read once (`runsettings`), a run's
name (`runids`), and when a DaemonJob starts a new run, scheduled or on demand (`runs`). May
import `shared`.
"""
