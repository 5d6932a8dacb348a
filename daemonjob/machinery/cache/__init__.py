"""The caches, as client-go's tools/cache: the informer (list, then watch), the indexed store,
frozen objects and records shared by every reader, the memo kept on them, and the garbage
collector's policy for what they hold. May import `process` and `client`.
"""
