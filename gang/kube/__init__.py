"""The Kubernetes API as the scheduler uses it: transport, informers, binder, events, status."""
