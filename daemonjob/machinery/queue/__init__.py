"""Work queues with client-go's util/workqueue semantics, their metrics, and the rate limiters
(the queue's and the API client's token bucket). May import `process` and `client`.
"""
