"""The API client: requests on pooled connections (`kube`, `exchange`, pipelined creates),
the credentials and the headers made from them, REST paths, watch streams, the API's errors,
retries on conflict, and the writer threads.
The bottom of the machinery: imports none of its other packages.
"""
