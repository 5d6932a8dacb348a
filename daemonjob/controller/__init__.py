"""The DaemonJob controller: wiring, acting on decisions and reporting.

`controller` wires informers to the queue and runs the workers; the act layer writes
through an injected Job-writing interface; `expectations` keeps a worker from acting
twice on a stale cache; `events` and `metrics` report; `transforms` trims cached objects.
"""
