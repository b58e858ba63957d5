"""Which relevance answers a member takes over from the member placed before it.

Why this exists: the placer asks each rule-aware plugin whether it matters for a member at all
(``relevant``), and a plugin that answers per template is asked once for a run of twins
(``same_template``). The members of an indexed Job, a Kubeflow job, a JobSet or a
LeaderWorkerSet differ in one label, their index, so by labels alone no two of them were twins
and every plugin was asked about every member: an eighth of such a gang's cycle at 2,000
nodes. A plugin that says which labels its answer reads (``relevance_label_keys``) keeps its
answer across members whose labels differ in none of those keys: nothing selects by an index
label unless a Service or a term says so, and then that plugin alone is asked again.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from gang.scheduling.framework import reads_no_labels
from gang.state.cache import Snapshot
from gang.state.podinfo import PodInfo


class LabelReads:
    """For one placement pass: the plugins (answering per template) whose relevance answer for
    one member holds for the next when the two differ only in labels. Made for every pass and
    asked in few (where members' labels differ): it does nothing until asked."""

    __slots__ = ("_holding", "_keys", "_members", "_plugins", "_saying", "_snap", "_union")
    #: per plugin that says, the label keys its relevance reads, and all of them together;
    #: asked once a pass, when labels first differ (None until then)
    _keys: dict[object, frozenset[str]] | None
    _union: frozenset[str]
    #: the plugins that say what they read (none, or the keys asked): their answers hold
    #: unless a key they read differs
    _saying: frozenset[object]
    #: the keys two members' labels differ in → the plugins whose answer holds; a run of
    #: indexed members differs in the same key each time
    _holding: dict[frozenset[str], frozenset[object]]

    def __init__(
        self,
        plugins: PluginsByReads,
        snap: Snapshot,
        members: Callable[[], Sequence[PodInfo]],
    ) -> None:
        self._plugins = plugins
        self._snap = snap
        #: the members the plugins are asked about (those to place and those placed)
        self._members = members
        self._keys = None

    def holding(self, before: PodInfo, pod: PodInfo) -> frozenset[object]:
        """The plugins whose relevance answer for ``before`` holds for ``pod``, a member of the
        same template but for its labels."""
        keys = self._keys
        if keys is None:
            members = self._members()
            keys = self._keys = {}
            for plugin in self._plugins.asked:
                read = label_keys_read(plugin, self._snap, members)
                if read is not None:
                    keys[plugin] = read
            self._union = frozenset().union(*keys.values())
            self._saying = self._plugins.reading_none.union(keys)
            self._holding = {}
        labels, earlier = pod.labels, before.labels
        if all(labels.get(key) == earlier.get(key) for key in self._union):
            return self._saying  # none of them reads a key the two differ in
        differing = frozenset({key for key, _ in labels.items() ^ earlier.items()})
        found = self._holding.get(differing)
        if found is None:
            found = self._holding[differing] = self._plugins.reading_none.union(
                p for p, read in keys.items() if differing.isdisjoint(read)
            )
        return found


@dataclass(frozen=True, slots=True)
class PluginsByReads:
    """A profile's plugins that answer per template, by what they say of the labels their
    relevance reads: ``reading_none`` say they read none (``reads_no_labels``), ``asked`` are
    asked which (one without ``relevance_label_keys`` may read any)."""

    reading_none: frozenset[object]
    asked: tuple[object, ...]

    @classmethod
    def of(cls, plugins: Collection[object]) -> PluginsByReads:
        reading_none = [
            p for p in plugins if getattr(type(p), "relevance_label_keys", None) is reads_no_labels
        ]
        return cls(frozenset(reading_none), tuple(p for p in plugins if p not in reading_none))


def label_keys_read(
    plugin: object, snap: Snapshot, pods: Sequence[PodInfo]
) -> frozenset[str] | None:
    """The pod label keys ``plugin`` may read to judge its relevance for one of ``pods`` on
    ``snap`` (its ``relevance_label_keys``); None when it may read any, or does not say."""
    method = getattr(plugin, "relevance_label_keys", None)
    found = None if method is None else method(snap, pods)
    return None if found is None else frozenset(found)
