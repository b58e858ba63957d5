"""The binding cycle: POST every permitted member's binding, concurrently, until each is done.

Once Permit has allowed a gang, binding it is a promise: every member gets bound, and a failure
of one member never releases the others (a binding cannot be undone, so all-or-nothing was
decided before the first POST). Each member is bound by its own task under a global
concurrency bound and the client's QPS limit, and retried with backoff on transient errors.
Where post workers send and nothing but the DefaultBinder's POST binds a member, a gang's first
POSTs go as batches instead (``_bind_batch``: no task per member on the scheduler's core), and a
member whose first answer is not a success continues in its own task exactly as above.

A member whose binding succeeded stays in ``gang.binding`` (and ``gang.bound_unseen``) until
the informer shows it bound: until then the cache holds it as assumed, and nothing may release,
re-plan or POST it again.

Outcomes of one POST, as the recorded apiserver answers them:
- 201: done.
- 409 "already assigned": read the pod; on the node we chose it is done (our earlier attempt
  landed, or a restarted scheduler re-bound it); on another node someone else bound it — that
  is now a fact the informer will count, so our reservation is forgotten.
- 404: the pod is gone; forget the reservation.
- 429 / 5xx / connection errors: retry with backoff (``Retry-After`` honoured by transport).
- anything else (403, 422...): forget the reservation and report it; the member returns to the
  queue on its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping

from gang.binding.adaptive import AdaptiveLimit
from gang.kube.transport import Kube, KubeError, backoff_delay
from gang.scheduling.framework import SKIP, PluginError, Profile, call_async, pre_bind_needed
from gang.scheduling.gang import Gang
from gang.scheduling.tracker import ClusterState

log = logging.getLogger(__name__)

Key = tuple[str, str]


class Binder:
    def __init__(
        self,
        kube: Kube,
        state: ClusterState,
        concurrency: AdaptiveLimit,
        on_bound: Callable[[Gang, Key, str], None] | None = None,
        profiles: Mapping[str, Profile] | None = None,
    ) -> None:
        self.kube = kube
        self.state = state
        #: PreBind / Bind / PostBind plugins per schedulerName; without profiles, DefaultBinder
        self.profiles = profiles or {}
        #: bindings in flight (see gang.binding.adaptive)
        self.slots = concurrency
        self._tasks: set[asyncio.Task[None]] = set()
        #: members whose binding has started and not ended (each is ended once, by ``_end``)
        self._members = 0
        self.on_bound = on_bound
        self.bound = 0
        self.errors = 0
        #: members sent in a gang's batch (the rest went one task each)
        self.batched = 0

    def bind_gang(self, gang: Gang) -> None:
        """Start binding every reserved member of a permitted gang not already in flight: as
        one batch where only the DefaultBinder binds and post workers send, else one task per
        member."""
        todo = [(key, node) for key, node in gang.reserved.items() if key not in gang.binding]
        if not todo:
            return
        gang.binding.update(key for key, _ in todo)
        self._members += len(todo)
        if self._batchable(gang, todo):
            self._spawn(self._bind_batch(gang, todo), f"bind {gang.key}")
        else:
            for key, node in todo:
                self._spawn(self._bind(gang, key, node), f"bind {key[0]}/{key[1]}")

    def _spawn(self, work: Coroutine[None, None, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _batchable(self, gang: Gang, todo: list[tuple[Key, str]]) -> bool:
        """Post workers take batches, and nothing but one POST binds each member: no PreBind
        work (volumes, claims) for any, the DefaultBinder first, no PostBind plugin."""
        pool = self.kube.post_pool
        if pool is None or pool.in_process:
            return False
        profile = self.profiles.get(gang.scheduler_name)
        if profile is None:
            return True
        return (
            not profile.post_binds
            and bool(profile.binds)
            and type(profile.binds[0]) is DefaultBinder
            and not any(
                pre_bind_needed(plugin, gang, key)
                for plugin in profile.pre_binds
                for key, _ in todo
            )
        )

    @property
    def in_flight(self) -> int:
        """Members whose binding is under way (posted, waiting for a slot, or retrying)."""
        return self._members

    def _end(self, gang: Gang, key: Key) -> None:
        """A member's binding is over: it leaves ``gang.binding`` unless it succeeded and the
        informer has not shown it yet (then it stays committed until it does)."""
        self._members -= 1
        if key not in gang.bound_unseen:
            gang.binding.discard(key)

    async def drain(self) -> None:
        """Wait for every bind in flight (graceful shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _run_plugins(self, gang: Gang, key: Key, node: str) -> None:
        """PreBind plugins, then Bind plugins until one does not SKIP."""
        profile = self.profiles.get(gang.scheduler_name)
        if profile is None:
            await DefaultBinder(self.kube).bind(gang, key, node)
            return
        budget = profile.budgets.asynchronous
        for plugin in profile.pre_binds:
            if not pre_bind_needed(plugin, gang, key):
                continue
            await call_async(
                plugin,
                "PreBind",
                budget,
                plugin.pre_bind,
                gang,
                key,
                node,
                passthrough=(KubeError,),
            )
        for binder in profile.binds:
            if type(binder) is DefaultBinder:  # ours, one request with its own timeout
                result = await binder.bind(gang, key, node)
            else:
                result = await call_async(
                    binder, "Bind", budget, binder.bind, gang, key, node, passthrough=(KubeError,)
                )
            if result != SKIP:
                return
        raise PluginError("Bind", "Bind", "every Bind plugin skipped the pod")

    async def _posted(self, gang: Gang, key: Key, node: str) -> None:
        """The Bind plugins under a slot; how long the answer took and whether it was a 429
        steer how many slots there are."""
        granted = await self.slots.acquire()
        throttled, measured = False, True
        try:
            await self._run_plugins(gang, key, node)
        except KubeError as err:
            throttled = err.status == 429
            measured = err.status != 0  # no answer at all says nothing of the server's load
            raise
        except BaseException:
            measured = False
            raise
        finally:
            self.slots.release(granted, throttled, measured)

    async def _post_bind(self, gang: Gang, key: Key, node: str) -> None:
        profile = self.profiles.get(gang.scheduler_name)
        for plugin in profile.post_binds if profile is not None else ():
            try:
                await call_async(
                    plugin,
                    "PostBind",
                    profile.budgets.asynchronous if profile else None,
                    plugin.post_bind,
                    gang,
                    key,
                    node,
                )
            except PluginError as err:
                log.warning("%s", err)  # informational point: the pod is bound regardless

    async def _bind(self, gang: Gang, key: Key, node: str, failed: KubeError | None = None) -> None:
        """Bind one member until it is done, retrying what is transient; ``failed``: its first
        POST was sent in a batch and answered with this error."""
        attempt = 0
        try:
            while gang.reserved.get(key) == node:
                if failed is None:
                    try:
                        await self._posted(gang, key, node)
                        self._done(gang, key, node)
                        await self._post_bind(gang, key, node)
                        return
                    except PluginError as err:
                        self.errors += 1
                        self._forget(gang, key)
                        self._event(gang, key, "Warning", "FailedBinding", str(err))
                        return
                    except KubeError as err:
                        failed = err
                if await self._settled(gang, key, node, failed):
                    return
                self.errors += 1
                delay = (
                    failed.retry_after
                    if failed.retry_after is not None
                    else backoff_delay(attempt, 0.1, 5.0)
                )
                attempt += 1
                log.info(
                    "bind %s/%s to %s failed (%s); retry %d in %.2fs",
                    *key,
                    node,
                    failed,
                    attempt,
                    delay,
                )
                failed = None
                await asyncio.sleep(delay)
        finally:
            self._end(gang, key)

    async def _bind_batch(self, gang: Gang, todo: list[tuple[Key, str]]) -> None:
        """A gang's first POSTs as batches: as many members at a time as there are slots and
        rate-limit tokens, all handed to a post worker together, with no task per member. A
        success is done here; any other answer hands the member to ``_bind``, as though its
        first POST had failed there. Returns once every member has been answered."""
        loop = asyncio.get_running_loop()
        unanswered = len(todo)
        all_answered = loop.create_future()
        sent = 0

        def over() -> None:
            nonlocal unanswered
            unanswered -= 1
            if unanswered == 0 and not all_answered.done():
                all_answered.set_result(None)

        try:
            while sent < len(todo):
                granted, slots = await self.slots.acquire_many(len(todo) - sent)
                try:
                    tokens = await self.kube.bind_tokens(slots)
                except BaseException:
                    self.slots.give_back(slots)
                    raise
                chunk, sent = todo[sent : sent + tokens], sent + tokens
                live = [(key, node) for key, node in chunk if gang.reserved.get(key) == node]
                for key, node in chunk:
                    if gang.reserved.get(key) != node:  # released or re-planned meanwhile
                        self._end(gang, key)
                        over()
                self.slots.give_back(slots - len(live))
                if not live:
                    continue
                try:
                    batched = await self._send_batch(gang, live, granted, over)
                except BaseException:  # nothing was sent (the workers could not be reached)
                    self.slots.give_back(len(live))
                    for key, _ in live:
                        self._end(gang, key)
                    raise
                if not batched:
                    self.slots.give_back(len(live))
                    for key, node in live:  # the workers went: one by one, in this process
                        self._spawn(self._bind(gang, key, node), f"bind {key[0]}/{key[1]}")
                        over()
        finally:
            for key, _ in todo[sent:]:  # cancelled before they were sent
                self._end(gang, key)
        if unanswered:
            await all_answered

    async def _send_batch(
        self, gang: Gang, live: list[tuple[Key, str]], granted: float, over: Callable[[], None]
    ) -> bool:
        def answered(index: int, err: KubeError | None) -> None:
            key, node = live[index]
            throttled = err is not None and err.status == 429
            self.slots.release(granted, throttled, measured=err is None or err.status != 0)
            try:
                if err is None:
                    try:
                        self._done(gang, key, node)
                    finally:
                        self._end(gang, key)
                else:
                    self._spawn(self._bind(gang, key, node, err), f"bind {key[0]}/{key[1]}")
            finally:
                over()

        bindings = []
        for key, node in live:
            member = gang.members.get(key)
            bindings.append((key[0], key[1], node, member.uid if member is not None else None))
        sent = await self.kube.bind_many(bindings, answered)
        if sent:
            self.batched += len(live)
        return sent

    async def _settled(self, gang: Gang, key: Key, node: str, err: KubeError) -> bool:
        """True when ``err`` ends this member's binding one way or another."""
        if err.retryable:
            return False
        if err.status == 409:
            try:
                current = await self.kube.get_pod(*key)
            except KubeError:
                return False  # cannot tell yet: retry
            if ((current or {}).get("spec") or {}).get("nodeName") == node:
                self._done(gang, key, node)
            else:  # bound elsewhere (a fact the informer counts), gone, or terminating
                self._forget(gang, key)
            return True
        self._forget(gang, key)
        if err.status != 404:
            self.errors += 1
            message = f"binding to {node} failed: {err.status} {err.reason}: {err.message}"
            self._event(gang, key, "Warning", "FailedBinding", message)
        return True

    def _event(self, gang: Gang, key: Key, kind: str, reason: str, message: str) -> None:
        pod = gang.members.get(key)
        self.state.reporter.pod_event(key, pod.uid if pod else "", kind, reason, message)

    def _done(self, gang: Gang, key: Key, node: str) -> None:
        member = gang.members.get(key)
        if member is not None and not member.assigned:  # the informer has not shown it yet
            gang.bound_unseen.add(key)
        self.bound += 1
        self._event(
            gang, key, "Normal", "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {node}"
        )
        if self.on_bound is not None:
            self.on_bound(gang, key, node)

    def _forget(self, gang: Gang, key: Key) -> None:
        """Drop a reservation whose bind cannot happen; a member still unassigned and alive
        goes back to the queue (no API event would bring it back otherwise)."""
        if gang.reserved.pop(key, None) is not None:
            self.state.cache.forget(key)
            self.state.queue.activate_unschedulable()
        if self.state.gangs.get(gang.key) is gang and gang.any_pending():
            self.state.enqueue(gang)


class DefaultBinder:
    """The Bind plugin every profile ends with: POST pods/{name}/binding."""

    name = "DefaultBinder"

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def bind(self, gang: Gang, pod: Key, node: str) -> str | None:
        member = gang.members.get(pod)
        await self.kube.bind(pod[0], pod[1], node, member.uid if member is not None else None)
        return None
