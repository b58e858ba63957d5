"""The informer's list, page by page: the first list applied as pages arrive, a later relist
as one picture, and a list that breaks half way leaving what it applied known (so what is gone
by the next list is deleted). The paging itself runs over HTTP in every scheduler test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gang.kube.informer import Informer
from gang.kube.transport import PODS, KubeError

Obj = dict[str, Any]


def pod(name: str, rv: int = 1) -> Obj:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": str(rv)}}


class Pages:
    """A stand-in for Kube.list_pages: each list is a list of pages, or a KubeError page."""

    def __init__(self) -> None:
        self.lists: list[list[list[Obj] | KubeError]] = []

    async def list_pages(
        self, kind: Any, decode: Any = None
    ) -> AsyncIterator[tuple[list[Obj], str]]:
        for page in self.lists.pop(0):
            if isinstance(page, KubeError):
                raise page
            yield page, "100"


class Recorder:
    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.log: list[tuple[str, str, int]] = []  # (what, name, lists left when it happened)

    def upsert(self, obj: Obj) -> None:
        self.log.append(("upsert", obj["metadata"]["name"], len(self.pages.lists)))

    def delete(self, key: tuple[str, str], obj: Obj | None) -> None:
        self.log.append(("delete", key[1], len(self.pages.lists)))

    def synced(self) -> None:
        self.log.append(("synced", "", len(self.pages.lists)))


async def test_a_list_broken_half_way_keeps_what_it_applied_and_the_next_deletes_the_gone() -> None:
    pages = Pages()
    handler = Recorder(pages)
    informer = Informer(pages, PODS, handler)  # type: ignore[arg-type]
    pages.lists = [
        [[pod("a"), pod("b")], KubeError(500, "InternalError", "etcd went away")],
        [[pod("a")], [pod("c")]],
    ]
    with pytest.raises(KubeError):
        await informer._relist()
    assert handler.log == [("upsert", "a", 1), ("upsert", "b", 1)]  # the first page, applied
    assert not informer.has_synced.is_set()
    await informer._relist()
    assert handler.log[2:] == [("upsert", "c", 0), ("delete", "b", 0), ("synced", "", 0)]


class Stepped(Pages):
    """Pages handed over one at a time, so the test sees what was applied in between."""

    def __init__(self) -> None:
        super().__init__()
        self.applied_before_page: list[int] = []
        self.handler: Recorder | None = None

    async def list_pages(
        self, kind: Any, decode: Any = None
    ) -> AsyncIterator[tuple[list[Obj], str]]:
        for page in self.lists.pop(0):
            assert self.handler is not None and not isinstance(page, KubeError)
            self.applied_before_page.append(sum(1 for e in self.handler.log if e[0] == "upsert"))
            yield page, "100"


async def test_the_first_list_is_applied_page_by_page_a_relist_at_once() -> None:
    pages = Stepped()
    handler = pages.handler = Recorder(pages)
    informer = Informer(pages, PODS, handler)  # type: ignore[arg-type]
    pages.lists = [[[pod("a")], [pod("b")], [pod("c")]]]
    await informer._relist()
    assert pages.applied_before_page == [0, 1, 2]  # each page applied before the next came
    pages.lists = [[[pod("a", 2)], [pod("b", 2)], [pod("c", 2)]]]
    await informer._relist()
    assert pages.applied_before_page[3:] == [3, 3, 3]  # nothing applied until the last page
    assert [e[1] for e in handler.log if e[0] == "upsert"][3:] == ["a", "b", "c"]
