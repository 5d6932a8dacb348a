"""The per-node view of a DaemonJob, built from its Jobs, their pods and the Nodes: pure, no I/O.

Imports only the domain; the commands read it, the cluster reads beside it never do.
"""
