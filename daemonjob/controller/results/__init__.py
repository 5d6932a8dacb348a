"""The result recorder: each finished node Job's result, written in batches to report objects,
and status.results in a pass's status. May import `passes` and everything below it.
"""
