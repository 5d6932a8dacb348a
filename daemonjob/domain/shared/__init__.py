"""What every capability of the domain uses: the API's names and timestamps, the records a
DaemonJob keeps on Nodes, the memo that keeps values derived from cached objects, messages cut
to what the API carries, Events, sorted lists of a plan's parts.

The bottom of the domain: imports nothing of it.
"""
