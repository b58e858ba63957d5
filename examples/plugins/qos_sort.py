"""Example QueueSort plugin: priority → QoS class → creation time.

gang's own PrioritySort also puts half-bound gangs first and breaks ties by name; this one is the
plain order many clusters want. Enable it in a profile (it replaces the default QueueSort, and
every profile of one process must use the same QueueSort):

    scheduler:
      plugin_paths: ["examples.plugins.qos_sort:QoSSort"]
      profiles:
        - scheduler_name: gang-scheduler
          plugins:
            disabled: [PrioritySort]
            enabled: [{name: QoSSort}]
"""

from __future__ import annotations

from gang.scheduling.gang import Gang


class QoSSort:
    name = "QoSSort"

    def sort_key(self, gang: Gang) -> tuple[int, int, float]:
        pods = list(gang.members.values())
        priority = max((p.priority for p in pods), default=0)
        qos = max((p.qos_rank for p in pods), default=0)  # Guaranteed 2, Burstable 1, BestEffort 0
        created = (
            gang.podgroup.creation_timestamp
            if gang.podgroup
            else min((p.creation_timestamp for p in pods), default=0.0)
        )
        return (-priority, -qos, created)
