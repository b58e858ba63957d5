"""Scheduler state: the cluster cache, its snapshots, and the compact shapes they hold."""
