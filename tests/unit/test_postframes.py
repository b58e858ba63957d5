"""The wire to the post workers: frames survive any split of the byte stream, and a stream of
frames goes out a few at a time (each pipe write is a system call that wakes the reader)."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from gang.kube.postframes import ANSWER, REQUEST, FrameWriter, frame, frames

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
