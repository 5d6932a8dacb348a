"""The preview: what a DaemonJob would do on the cluster as it is now (`kubectl daemonjob plan`),
and the report it prints. The top of the domain: may import every other package of it.
"""
