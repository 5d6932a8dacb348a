"""The validating admission webhook: DaemonJobs refused at `kubectl apply` by the controller's own rules.

`review` answers AdmissionReviews with the rule book of `domain/spec/validate.py`;
`certificates` keeps the serving certificate and the webhook configuration's CA bundle.
Sits on the domain and the machinery, beside the controller.
"""
