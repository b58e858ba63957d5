"""Parsed informer objects of a few kinds, kept by key: what the state's catalogs share.

Why: the volume and DRA catalogs each read a handful of kinds from informers into frozen shapes,
once, at the boundary. They keep the same rules, written here once: an object that does not
parse is remembered with the reason (a pod that needs it waits saying so) and counts as absent,
so one odd object never blinds the scheduler to the others; every change bumps ``version``,
which the plugins' caches key on; an update that parses to what is stored changes nothing.

A catalog names, per kind, the dict holding it, the parser, and whether it is keyed by
``(namespace, name)`` or by name (``kinds``); the parse errors it turns into rejections
(``parse_errors``) and how a rejection reads (``rejection``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gang.kube.informer import object_key


class KindTable(NamedTuple):
    """One kind of a catalog: where its objects live and how they are read."""

    store: dict[Any, Any]
    parse: Callable[[Mapping[str, Any]], Any]
    namespaced: bool


@dataclass(slots=True)
class KindCatalog:
    #: objects that could not be read (kind, namespace, name) → why
    rejected: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: bumped on every change, for caches keyed on the catalog's state
    version: int = 0

    # --- what a catalog says of itself ------------------------------------------------------

    def kinds(self) -> Mapping[str, KindTable]:
        raise NotImplementedError

    def parse_errors(self) -> tuple[type[Exception], ...]:
        raise NotImplementedError

    def rejection(self, kind: str, name: str, err: Exception) -> str:
        return str(err)

    def stored(self, kind: str, value: Any) -> None:
        """Called after ``value`` of ``kind`` was stored (a catalog's own bookkeeping)."""

    # --- the informers' side ------------------------------------------------------------------

    def upsert(self, kind: str, raw: Mapping[str, Any]) -> bool:
        """Apply an informer object of ``kind``; True if something changed."""
        namespace, name = object_key(raw)
        if not name:
            return False
        table = self.kinds()[kind]
        self.rejected.pop((kind, namespace, name), None)
        try:
            value = table.parse(raw)
        except self.parse_errors() as err:
            self.rejected[(kind, namespace, name)] = self.rejection(kind, name, err)
            self.remove(kind, namespace, name)
            return True
        key = (namespace, name) if table.namespaced else name
        changed = bool(table.store.get(key) != value)
        table.store[key] = value
        self.stored(kind, value)
        if changed:
            self.version += 1
        return changed

    def remove(self, kind: str, namespace: str, name: str) -> None:
        table = self.kinds()[kind]
        if table.store.pop((namespace, name) if table.namespaced else name, None) is not None:
            self.version += 1
