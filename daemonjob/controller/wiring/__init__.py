"""The wiring: the Controller that informers feed, the worker threads that pass over
DaemonJobs, and the routing of informer events to the DaemonJobs they concern.

The top of the controller: may import every other package of it.
"""
