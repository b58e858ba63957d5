"""Example Score plugin: prefer the node left with the fewest free GPUs after placement.

A GPU bin-packer: filling nodes that are already partly used keeps whole 8-GPU nodes free for the
next big gang. Pods that request no GPU score every node the same (0), so the other scores
decide for them. Enable it with a weight:

    scheduler:
      plugin_paths: ["examples.plugins.fewest_free_gpus:FewestFreeGPUs"]
      profiles:
        - scheduler_name: gang-scheduler
          plugins:
            enabled: [{name: FewestFreeGPUs, weight: 5}]
          plugin_args:
            FewestFreeGPUs: {resource: nvidia.com/gpu}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gang.scheduling.framework import MAX_NODE_SCORE, ScoreInput, Scores


class FewestFreeGPUs:
    name = "FewestFreeGPUs"

    def __init__(self, args: dict[str, Any]) -> None:
        self.resource = str(args.get("resource", "nvidia.com/gpu"))

    def score(self, s: ScoreInput) -> Scores:
        if self.resource not in s.resources:
            return np.zeros(len(s.candidates))
        col = s.resources.index(self.resource)
        left = s.free_after[:, col].astype(np.float64)
        total = np.maximum(s.allocatable[:, col].astype(np.float64), 1.0)
        return (1.0 - left / total) * MAX_NODE_SCORE

    def normalize(self, scores: Scores) -> Scores:
        return np.clip(scores, 0.0, MAX_NODE_SCORE)
