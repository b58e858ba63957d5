"""gang as a kube-scheduler extender: gang's Filter and Score plugins behind the HTTP protocol."""
