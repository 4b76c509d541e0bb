"""Error types shared by every layer.

Errors are for humans: each one says where (file, line, field) and what was expected, so that a user
can fix the input without reading a traceback. The CLI prints ``str(error)`` and exits with
``error.exit_code``; it only shows a traceback for errors that are *not* ``RlverError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import get_close_matches

#: Exit codes a script can tell apart (``rlver --help`` and the README list them; one home here):
#: every unit of work finished (dialogues of ``eval``, judge calls of ``judge``, cells of ``probe``).
EXIT_OK = 0
#: Nothing finished (:class:`NothingFinished`), or another failure at run time.
EXIT_FAILED = 1
#: Bad input (a flag, a setting, a file), refused in one ``error:`` line before any work.
EXIT_BAD_INPUT = 2
#: The run finished but some of its units failed: its results are partial (``--resume`` or a rerun
#: retries them). Distinct from 1 so that a script can tell a partial run from a good or a dead one.
EXIT_SOME_FAILED = 3
#: Interrupted: 128 + the signal, as the shell counts (130 Ctrl-C, 143 SIGTERM); what finished is kept.
EXIT_CODES_HELP = (
    "Exit codes: 0 all finished; 3 finished, but some dialogues (judge calls, probe cells) failed; "
    "1 none finished, or another failure; 2 bad input, refused before any work; 130/143 stopped by "
    "Ctrl-C/SIGTERM, what finished kept."
)


class RlverError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code: int = EXIT_FAILED


@dataclass
class Problem:
    """One problem in one place of an input file: rendered as ``file:line: field: problem`` (``file:line:col:``
    when the column is known)."""

    path: str
    line: int | None
    field: str | None
    message: str
    #: the column on ``line`` (1-based), where the reader knows it: ``file:line:col:`` as compilers say
    column: int | None = None

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.line is not None and self.column is not None:
            where += f":{self.column}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class InputError(RlverError):
    """An input file (profiles, transcripts, config) is malformed. Carries every problem found."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, problems: list[Problem] | Problem, summary: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        self.summary = summary
        super().__init__(str(self))

    def __str__(self) -> str:
        head = [self.summary] if self.summary else []
        return "\n".join(head + [str(p) for p in self.problems])


class ConfigError(RlverError):
    """A configuration key is unknown or has the wrong type."""

    exit_code = EXIT_BAD_INPUT


class DownloadError(RlverError):
    """A download failed (offline, HTTP error, checksum mismatch)."""


class PolicyOutOfMemoryError(RlverError):
    """The policy could not generate even one reply in memory: the step fails instead of dropping the
    dialogue (which would bias training towards short dialogues). The message names what to lower."""

    exit_code = EXIT_BAD_INPUT


class NothingFinished(RlverError):
    """A run produced no result at all (no dialogue finished, nothing judged, no probe cell).

    Exit code 1: the input was fine but every unit of work failed (a dead endpoint, a wrong model
    name). The message is one line saying why and where the per-item errors are recorded; a run
    where only *some* items failed is not an error (its summary shows ``n finished / m failed``) and
    exits :data:`EXIT_SOME_FAILED`.
    """

    exit_code = EXIT_FAILED


class LLMError(RlverError):
    """A call to a language model failed for good (after the bounded retries)."""

    kind: str = "llm_error"


class LLMTimeoutError(LLMError):
    kind = "timeout"


class LLMRateLimitError(LLMError):
    kind = "rate_limit"


class LLMServerError(LLMError):
    kind = "server_error"


class LLMConnectionError(LLMError):
    kind = "connection"


class LLMResponseError(LLMError):
    """The server answered, but not with a usable chat completion (garbage, empty, truncated)."""

    kind = "bad_response"


class SimulatorError(RlverError):
    """The simulated user could not produce a valid turn (e.g. unparseable appraisal twice)."""

    kind: str = "simulator_error"


class AppraisalParseError(SimulatorError):
    kind = "appraisal_parse"


def error_kind(exc: BaseException) -> str:
    """A short, stable name for an error, used to count failures by kind in run summaries."""
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str):
        return kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    return type(exc).__name__


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice nearest to ``word`` (difflib's ratio at least 0.6), or None when none is near."""
    near = get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return near[0] if near else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean NAME?"`` for the choice nearest to ``word`` (``""`` when none is near).

    For the messages that refuse a name (a data set, a model, a prompt, a config key): a one-letter
    typo is fixed from the message itself instead of from the list of every choice.
    """
    near = nearest(word, choices)
    return f"; did you mean {near}?" if near else ""
