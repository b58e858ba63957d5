"""The documentation's commands, run: every shell block of README.md and docs/*.md marked runnable.

A block is runnable when the line directly before its opening fence (```sh, ```bash or
```shell) is the HTML comment ``<!-- runnable -->`` (GitHub does not show it). Unmarked blocks
are not run: they need a real cluster, install something, run long or never exit (see
docs/development.md, "Runnable blocks").

Each runnable block runs as ``bash -euo pipefail``, in file order, with a timeout, against one
cluster shared by the whole module: ``gang sim serve --kubelet`` with ``gang run`` scheduling on
it. ``KUBECONFIG`` points at the simulator, ``GANG_SCHEDULER_URL`` is the scheduler's URL, ``PATH``
starts with this environment's ``bin`` (``gang``, ``kubectl-gang``), and the working directory
is a scratch copy of the repository root (its entries linked), so ``examples/...`` resolves and
what a block writes stays out of the working tree. A block that exits non-zero fails with its
file, line and output.

The module also checks the pages hang together: every page in docs/ is linked from README.md,
every relative link resolves (a ``#fragment`` to a heading), and every repository path named in
backticks exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sim.kubectl_server import free_port, gang_run, gang_sim_serve

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKER = "<!-- runnable -->"
SHELLS = frozenset({"sh", "bash", "shell"})
#: the shared cluster: enough for every example (examples/README.md)
NODES = "7:gpu=8,zones=2"
BLOCK_TIMEOUT = 60.0
FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
#: repository paths named in inline code (`gang/sim/latency.py`, `examples/`)
REPO_PATH = re.compile(r"`((?:gang|tests|examples|manifests|docs)/[^`\s]*)`")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    runnable: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Page:
    path: Path
    blocks: list[Block]
    #: the text outside fenced blocks (fences blanked, so line numbers hold)
    prose: str
    #: lines holding the marker outside any fence
    markers: list[int]


def parse(path: Path) -> Page:
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    prose: list[str] = []
    markers: list[int] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip() == MARKER:
                markers.append(i + 1)
            prose.append(lines[i])
            i += 1
            continue
        fence = opening["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        info = opening["info"].split()
        blocks.append(
            Block(
                path,
                i + 1,
                info[0] if info else "",
                "\n".join(lines[i + 1 : end]) + "\n",
                i > 0 and lines[i - 1].strip() == MARKER,
            )
        )
        prose.extend([""] * (min(end, len(lines) - 1) - i + 1))
        i = end + 1
    return Page(path, blocks, "\n".join(prose), markers)


PAGES = [parse(p) for p in pages()]
RUNNABLE = [b for page in PAGES for b in page.blocks if b.runnable]


def test_every_marker_marks_a_shell_block() -> None:
    runnable = {(b.path, b.line - 1) for b in RUNNABLE if b.lang in SHELLS}
    stray = [
        f"{page.path.relative_to(ROOT)}:{line}"
        for page in PAGES
        for line in page.markers
        if (page.path, line) not in runnable
    ]
    assert not stray, f"{MARKER} not directly before a ```sh block: {stray}"
    assert len(RUNNABLE) >= 10, "the runnable blocks were not found"


# --- the commands ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocsCluster:
    env: dict[str, str]
    cwd: Path
    scheduler: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module")
def docs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsCluster]:
    """The simulator and a scheduler on it, and the environment the blocks run in."""
    tmp = tmp_path_factory.mktemp("docs")
    with gang_sim_serve(tmp, "--kubelet", nodes=NODES) as served:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = tmp / "gang-run.log"
        with gang_run(served.kubeconfig, log, port, ready_url=url) as scheduler:
            scratch = tmp / "root"
            scratch.mkdir()
            for entry in ROOT.iterdir():
                if entry.name != ".git":
                    (scratch / entry.name).symlink_to(entry)
            env = {
                **os.environ,
                "KUBECONFIG": str(served.kubeconfig),
                "KUBECACHEDIR": str(tmp / "kube-cache"),
                "GANG_SCHEDULER_URL": url,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            }
            yield DocsCluster(env, scratch, scheduler, log)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_runnable_block_succeeds(block: Block, docs_cluster: DocsCluster) -> None:
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.text],
            cwd=docs_cluster.cwd,
            env=docs_cluster.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        output = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else ""
        pytest.fail(
            f"{block.where}: still running after {BLOCK_TIMEOUT:g} s\n--- block\n{block.text}"
            f"--- output\n{output}",
            pytrace=False,
        )
    assert docs_cluster.scheduler.poll() is None, docs_cluster.log.read_text()[-5000:]
    if done.returncode != 0:
        pytest.fail(
            f"{block.where}: exited {done.returncode}\n--- block\n{block.text}"
            f"--- output\n{done.stdout}",
            pytrace=False,
        )


# --- links -------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Page) -> set[str]:
    found: set[str] = set()
    for line in page.prose.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading[1])
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links(page: Page) -> list[str]:
    return LINK.findall(page.prose)


def local_target(page: Page, link: str) -> tuple[Path, str] | None:
    """(file, fragment) of a relative link; None for a URL."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", link):
        return None
    target, _, fragment = link.partition("#")
    return (page.path.parent / target).resolve() if target else page.path, fragment


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = PAGES[0]
    linked = {t[0] for link in links(readme) if (t := local_target(readme, link)) is not None}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not missing, f"README.md links no docs/{missing}"


def test_every_relative_link_resolves() -> None:
    by_path = {page.path.resolve(): page for page in PAGES}
    broken = []
    for page in PAGES:
        for link in links(page):
            target = local_target(page, link)
            if target is None:
                continue
            path, fragment = target
            where = f"{page.path.relative_to(ROOT)}: {link}"
            if not path.exists() or not path.is_relative_to(ROOT):
                broken.append(f"{where} (no such file in the repository)")
            elif fragment and path.suffix == ".md":
                known = by_path.get(path.resolve()) or parse(path)
                if fragment not in anchors(known):
                    broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_named_repository_path_exists() -> None:
    missing = []
    for page in PAGES:
        for name in REPO_PATH.findall(page.prose):
            if "..." in name or "…" in name:
                continue  # a pattern in words, not a path
            if not (list(ROOT.glob(name)) if "*" in name else (ROOT / name).exists()):
                missing.append(f"{page.path.relative_to(ROOT)}: {name}")
    assert not missing, "\n".join(missing)
