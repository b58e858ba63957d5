"""gang: a gang scheduler for Kubernetes.

Gangs (pods sharing a ``scheduling.x-k8s.io/pod-group`` label, described by a PodGroup) are
reserved whole on one snapshot of the cluster, held in a Permit-style wait, and bound together
or released together. See ``README.md`` and the design notes for the data flow and layers.
"""

__version__ = "0.1.0"
