"""Placement decisions: per-node filters and the gang reservation built on them."""
