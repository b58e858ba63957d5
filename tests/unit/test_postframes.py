"""The wire to the post workers: frames survive any split of the byte stream, and a stream of
frames goes out a few at a time (each pipe write is a system call that wakes the reader)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from gang.kube.postframes import (
    ANSWER,
    OKS,
    REQUEST,
    FrameWriter,
    frame,
    frames,
    oks_frame,
    oks_of,
)

_FRAMES = st.lists(
    st.tuples(
        st.sampled_from([REQUEST, ANSWER]), st.integers(0, 2**32 - 1), st.binary(), st.binary()
    ),
    max_size=8,
)


@given(_FRAMES, st.lists(st.integers(1, 64), min_size=1))
def test_frames_come_back_whole_however_the_stream_is_cut(
    sent: list[tuple[bytes, int, bytes, bytes]], cuts: list[int]
) -> None:
    stream = b"".join(frame(*f) for f in sent)
    buffer, got, at, i = bytearray(), [], 0, 0
    while at < len(stream):
        step = cuts[i % len(cuts)]
        buffer += stream[at : at + step]
        at, i = at + step, i + 1
        got.extend(frames(buffer))
    assert got == sent and not buffer


async def test_a_lone_frame_goes_at_once_and_a_stream_a_few_at_a_time() -> None:
    writes: list[bytes] = []
    writer = FrameWriter(writes.append, interval=0.05)
    writer.add(b"a")
    await asyncio.sleep(0)
    assert writes == [b"a"]  # written at the end of the turn it was added in
    writer.add(b"b")
    writer.extend([b"c", b"d"])
    await asyncio.sleep(0.01)
    assert writes == [b"a"]  # within the interval of the last write: held
    await asyncio.sleep(0.06)
    assert writes == [b"a", b"bcd"]  # then together
    writer.add(b"e")
    writer.flush()  # at shutdown: at once
    assert writes == [b"a", b"bcd", b"e"]
    await asyncio.sleep(0.06)
    assert writes == [b"a", b"bcd", b"e"]  # the scheduled write found nothing left


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(100, 599))))
def test_successes_read_back_as_written(successes: list[tuple[int, int]]) -> None:
    buffer = bytearray(oks_frame(successes))
    [(kind, _, text, body)] = frames(buffer)
    assert (kind, text) == (OKS, b"")
    assert list(oks_of(body)) == successes


async def test_successes_go_in_one_frame_after_the_frames_of_their_write() -> None:
    writes: list[bytes] = []
    writer = FrameWriter(writes.append, interval=0.05)
    writer.add_success(7, 201)  # alone: it schedules the write, as a frame would
    await asyncio.sleep(0)
    assert writes == [oks_frame([(7, 201)])]
    writer.add_success(8, 201)
    writer.add(b"a")
    writer.add_success(9, 200)
    writer.flush()
    assert writes[1] == b"a" + oks_frame([(8, 201), (9, 200)])
    await asyncio.sleep(0.06)
    assert len(writes) == 2  # the scheduled write found nothing left
