"""The spec: a DaemonJob's spec read once into a frozen `DaemonJobSpec`, and the rule book.

`validate` collects the problems that make a spec unusable (`problems`) and the settings that
do nothing as combined (`warnings`); one module per part of the spec (`rolloutspec`,
`retryspec`, `maintenancespec`, `nodecheckspec`, `nodeparams`, `resultsspec`), node eligibility
and the selectors it compiles (`selectors`, `labelrules`, `selectortext`), template revisions and
Job names. May import `schedule` and `shared`.
"""
