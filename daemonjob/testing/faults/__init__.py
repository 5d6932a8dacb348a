"""Faults for integration tests: a TCP proxy that partitions, hangs or slows the connections
to the API server (`proxy`, and `proxiedconfig`, the kubeconfig that goes through it), and a
pause of a whole process (`pausing`). May import the test bed's helpers (`children`); the
tests import it, no other part of the test bed does.
"""
