"""Small HTTP servers: /metrics, the probes and, over TLS, the admission webhook; their routes,
the request head judged before the body, each request's dispatch to its route, listening
sockets, certificates, who may read an endpoint (TokenReview, SubjectAccessReview), and the
byte budget of concurrent requests.
May import `queue`, `process` and `client`.
"""
