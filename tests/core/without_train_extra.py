"""Run ``rlver`` as an install without the ``[train]`` extra would: ``python without_train_extra.py ARGS``.

An import hook refuses torch, transformers, tokenizers, peft and tensorboard (whatever this venv
holds), so a core command that reaches any of them fails here as it would in a light install, and a
command that needs them meets :func:`rlver.extras.require_extra` exactly as there. Used by
``tests/core/test_extras_light_core.py``; ``make light-test`` checks the same in a real light venv.
"""

from __future__ import annotations

import importlib.abc
import sys

from rlver.extras import EXTRA_MODULES

BLOCKED = frozenset(EXTRA_MODULES["train"])


class RefuseTrainExtra(importlib.abc.MetaPathFinder):
    """Answers every import of a blocked top-level module with ModuleNotFoundError, as pip's absence would."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: a light install)", name=name)
        return None


def install() -> None:
    for name in list(sys.modules):  # nothing imported before the hook may leak through
        if name.partition(".")[0] in BLOCKED:
            raise RuntimeError(f"{name} was imported before the blocker")
    sys.meta_path.insert(0, RefuseTrainExtra())


if __name__ == "__main__":
    install()
    if sys.argv[1:2] == ["--import-all"]:
        import importlib
        import pkgutil

        import rlver

        skip = tuple(sys.argv[2:])
        for module in pkgutil.walk_packages(rlver.__path__, "rlver."):
            if module.name.endswith("__main__") or module.name.startswith(skip):
                continue
            importlib.import_module(module.name)  # a core module that reaches torch raises here
        print("imported")
    else:
        from rlver.cli import main

        sys.argv = ["rlver", *sys.argv[1:]]
        main()
