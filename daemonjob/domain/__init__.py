"""The pure domain: what a DaemonJob means, with no I/O.

The Job contract (`jobs`), revisions and names (`revision`), label selectors
(`selectors`), node eligibility (`eligibility`) and the decision (`decide`), a chain of
steps each in its own module: `validate`, `plan` (per node), the rollout's `gates` (one
module each, run in their precedence), `actions`, `conditions`, `rolloutstatus`.
`memo` is the seam through which the caches keep derived values. Nothing here imports the
machinery that talks to an API server, so every rule is a plain unit test.
"""
