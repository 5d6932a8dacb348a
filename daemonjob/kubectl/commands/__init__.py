"""The plugin's commands, one module each: what it reads or writes, and what it prints.

May import one another, the cluster reads, the per-node views and the formats; never the
arguments or the entry points, which import it.
"""
