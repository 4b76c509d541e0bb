"""The optional parts of an rlver install, and the one refusal when a command needs a missing one.

Why a module of its own: ``pip install rlver`` is the light core (benchmarking a model behind an
endpoint, reports, audits: no torch); the local-model stack is the ``[train]`` extra. Several commands
need that stack (``train``, ``export``, ``demo``, ``models fetch``, ``eval --agent-local``, any
``kind: local`` model), and without it each used to end in an ``ImportError`` traceback from deep
inside. :func:`require_extra` is the one check they all call first: it looks for the extra's modules
without importing them, and refuses with one line (exit 2) naming the pip command.

The module lists here are the import names of the distributions pyproject.toml lists under each
extra; ``tests/core/test_extras_light_core.py`` checks that the two agree.
"""

from __future__ import annotations

import importlib.util

from rlver.errors import RlverError

#: Each extra → the modules it installs that rlver imports (the distributions' import names).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "train": ("torch", "transformers", "tokenizers", "peft", "tensorboard"),
}
#: ``[gguf]`` is the ``gguf`` package on top of ``[train]`` (pyproject.toml): ``rlver models fetch``
#: needs both, and naming ``[train]`` there left the user one refusal short (the docs say ``[gguf]``).
EXTRA_MODULES["gguf"] = ("gguf", *EXTRA_MODULES["train"])

#: Each extra → what it is for, as the refusal says it.
EXTRA_PURPOSE: dict[str, str] = {
    "train": "the local-model stack",
    "gguf": "the GGUF reader and the local-model stack",
}


class MissingExtraError(RlverError):
    """A command needs an extra this install lacks (exit 2: nothing ran, the install is the input)."""

    exit_code = 2


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [module for module in EXTRA_MODULES[extra] if not _importable(module)]


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # an import hook refused it, or a broken half-install
        return False


def install_command(extra: str) -> str:
    """How to add ``extra``: rlver is installed from its checkout (it is not on the package index), with
    constraints.txt's CPU torch as ``make setup`` does (on a GPU machine without it: docs/concepts.md)."""
    return f"pip install -c constraints.txt -e '.[{extra}]' (in the rlver checkout)"


def require_extra(extra: str, what: str) -> None:
    """Refuse ``what`` (``"rlver train"``, ``"--agent-local"``) when ``extra`` is not installed.

    Called before any work, so the refusal comes before a folder is made or a config is read.
    """
    missing = missing_modules(extra)
    if missing:
        raise MissingExtraError(
            f"{what} needs the [{extra}] extra ({EXTRA_PURPOSE[extra]}), which is not installed here "
            f"(no {', '.join(missing)}): {install_command(extra)}"
        )
