"""The decision: `decide(DecisionInput) -> Decision`, the chain that reads the input, plans,
runs the gates, chooses the actions and concludes the conditions and the status.

It orchestrates the steps of `rollout` and the `gates`, so it sits above them: it may import
every domain package but `preview`, which shows what it decides.
"""
