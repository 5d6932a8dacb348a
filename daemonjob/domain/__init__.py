"""The pure domain: what a DaemonJob means, with no I/O.

The Job contract (`jobs`), revisions and names (`revision`), label selectors
(`selectors`), node eligibility (`eligibility`) and the decision (`decide`). Nothing here
imports the machinery that talks to an API server, so every rule is a plain unit test.
"""
