"""``gang run`` as a child process that can be SIGKILLed and restarted, as Kubernetes would.

Crash safety cannot be tested in-process: cancelling a task runs ``finally`` blocks, and a
scheduler that cleans up on the way out proves nothing about the machine that loses power
mid-binding. So reliability tests and the chaos driver run the real ``gang run`` command against a
kubeconfig and end it with SIGKILL — no handler, no flush, sockets cut by the kernel — then start
a fresh one that knows only what the API says. ``kill`` is synchronous so it can fire from inside
a simulator callback, at an exact point of a binding sequence.

Exits nobody asked for (the process stopped on its own) are recorded with their status: a
supervisor restarts them too, but they are findings.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO


class SchedulerProcess:
    def __init__(
        self,
        kubeconfig: str | Path,
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        args: Sequence[str] = ("--port", "0", "--log-level", "WARNING"),
    ) -> None:
        self.kubeconfig = str(kubeconfig)
        self.env = dict(env or {})
        self.log_path = log_path
        self.args = list(args)
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        self.kills = 0
        #: return codes of exits that were neither a kill nor a requested stop
        self.unexpected_exits: list[int] = []
        self._expected_exit = False
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> None:
        """Start ``gang run`` (a previous process must have exited)."""
        if self.running:
            raise RuntimeError("the scheduler process is already running")
        self._note_exit()
        if self.log_path is not None and self._log is None:
            self._log = self.log_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gang",
            "run",
            "--kubeconfig",
            self.kubeconfig,
            *self.args,
            env={**os.environ, **self.env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=self._log if self._log is not None else asyncio.subprocess.DEVNULL,
        )
        self._expected_exit = False
        self.starts += 1

    def kill(self) -> bool:
        """SIGKILL now; True if a running process got it. Safe in synchronous callbacks."""
        if not self.running:
            return False
        assert self.proc is not None
        self._expected_exit = True
        self.proc.send_signal(signal.SIGKILL)
        self.kills += 1
        return True

    async def wait(self) -> int:
        assert self.proc is not None
        return await self.proc.wait()

    async def restart(self) -> None:
        """Kill if running, wait for the exit, start again."""
        if self.running:
            self.kill()
        if self.proc is not None:
            await self.proc.wait()
        await self.start()

    def exited_unexpectedly(self) -> bool:
        """The process is gone without a kill or stop: record it (once) and say so."""
        if self.proc is None or self.proc.returncode is None or self._expected_exit:
            return False
        self._note_exit()
        return True

    def _note_exit(self) -> None:
        if self.proc is not None and self.proc.returncode is not None and not self._expected_exit:
            self.unexpected_exits.append(self.proc.returncode)
            self._expected_exit = True  # counted once

    async def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM (a graceful shutdown), SIGKILL if it takes longer than ``grace`` seconds."""
        proc = self.proc
        if proc is not None and proc.returncode is None:
            self._expected_exit = True
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        self._note_exit()
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode if proc is not None else None

    def log_tail(self, lines: int = 20) -> str:
        return "" if self.log_path is None else log_tail(self.log_path, lines)


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a process log ("" if it cannot be read)."""
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""
