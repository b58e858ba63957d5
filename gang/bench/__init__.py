"""Benchmarks: the scheduler against a simulated (or real) cluster, measured from outside."""
