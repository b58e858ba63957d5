"""The gang queue: ordering, backoff, and re-activation on cluster events."""
