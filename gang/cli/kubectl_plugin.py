"""``kubectl-gang``: gang as a kubectl plugin, so ``kubectl gang explain ns/name`` works.

kubectl runs any ``kubectl-<name>`` executable on the PATH for ``kubectl <name> ...`` and passes
the remaining arguments; installing gang puts ``kubectl-gang`` beside ``gang``. The plugin is
the ``gang`` command itself (``kubectl gang fit -f job.yaml``, ``kubectl gang snapshot -o f``);
kubectl hands a plugin no flags of its own, so it reads ``KUBECONFIG`` like kubectl does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from gang.cli import main as gang_main

    return gang_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
