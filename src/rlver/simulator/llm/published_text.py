"""The published prompts, read out of the fetched source files with ``ast`` (never imported or run).

SAGE (Tencent/digitalhuman, ``SAGE/``) and RLVER (zzjweb/digitalhuman) write their prompts as string
literals in Python files: a template with ``{{slot}}`` placeholders per simulator call, a few short
texts spliced in (the opening instruction, the headings of the appraisal handed to the reply call), the
tier thresholds, the goodbye words and the agent's system prompt. This module finds each of them by
its place in the syntax tree (an assignment's name, a call's first argument), so the text rlver sends
is the published text itself, byte for byte, and no line of it is written into rlver's source.

Every template's slots are checked against the slots rlver fills: a file with a slot rlver does not
know (or without one it needs) is refused with one ``error:`` line (exit 2), never sent half-filled.

Two bugs of the published files are handled here and documented in docs/published-text.md:
``hard_player_simulator_dsv3.py`` does not compile (``call_api``'s docstring is not indented, dsv3 :36-38 ``Implement your own``),
so that one docstring is indented before parsing; the rest of the file is parsed as published.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache

from rlver.errors import InputError, Problem
from rlver.profiles.published_code import read_published

_SLOT = re.compile(r"\{\{(\w+)\}\}")

#: The slots each template must have, exactly (what rlver's builders fill, in the published order).
SAGE_APPRAISAL_SLOTS = frozenset({"target", "simulator_role", "simulator_scene", "emotion", "dialog_history"})
SAGE_REPLY_SLOTS = frozenset(
    {"target", "emotion", "player_type", "player_topic", "dialog_history", "new_history", "planning"}
)
TRAINING_APPRAISAL_SLOTS = frozenset(
    {"target", "emotion", "player_type", "player_topic", "dialog_history", "new_history"}
)
TRAINING_REPLY_SLOTS = SAGE_REPLY_SLOTS


@dataclass(frozen=True)
class PlanningPart:
    """One piece of the appraisal text handed to the reply call: a literal, or an appraisal field."""

    text: str = ""
    field: str | None = None


@dataclass(frozen=True)
class SimulatorTexts:
    """What one published simulator file says, as data."""

    file: str
    target: str
    appraisal_template: str
    reply_template: str
    #: the reply call's appraisal slot when there is no appraisal yet (the opening line)
    opening_planning: str
    #: the reply call's history slot when the dialogue is empty (the opening line)
    empty_history: str
    #: how the appraisal is spliced into the reply call (literals and SAGE field names, in order)
    planning_parts: tuple[PlanningPart, ...]
    #: the names the history gives the user and the agent (``{"user": ..., "assistant": ...}``)
    speakers: dict[str, str]
    #: tier names and their lower bounds, in the published order (S first)
    tiers: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class DialogueLoopTexts:
    """SAGE's dialogue loop (``test_npc.py``): the words that mark a goodbye."""

    goodbye_words: tuple[str, ...]


def _problem(file: str, message: str) -> InputError:
    return InputError(Problem(f"published_code/{file}", None, None, message))


def _repair_call_api(source: str) -> str:
    """``hard_player_simulator_dsv3.py``: indent the docstring of ``def call_api`` (a published syntax
    error: the docstring starts in column 0, so the file does not compile as released)."""
    lines = source.split("\n")
    for i, line in enumerate(lines[:-1]):
        if line.startswith("def call_api(") and lines[i + 1].startswith("'''"):
            j = i + 1
            while j < len(lines):
                lines[j] = "    " + lines[j]
                if j > i + 1 and lines[j].strip() == "'''":
                    break
                j += 1
            break
    return "\n".join(lines)


def _tree(file: str) -> ast.Module:
    source = read_published(file).decode("utf-8")
    try:
        return ast.parse(source)
    except SyntaxError:
        try:
            return ast.parse(_repair_call_api(source))
        except SyntaxError as exc:
            raise _problem(file, f"does not parse as Python (line {exc.lineno}): {exc.msg}") from None


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _assigned(scope: ast.AST, name: str) -> ast.AST | None:
    """The value first assigned to ``name`` (a plain or ``self.`` name) anywhere under ``scope``."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Name) and target.id == name) or (
                    isinstance(target, ast.Attribute) and target.attr == name
                ):
                    return node.value
    return None


def _function(tree: ast.AST, name: str, file: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise _problem(file, f"no function {name!r}: not the published file rlver reads")


def _text(scope: ast.AST, name: str, file: str) -> str:
    value = _string(_assigned(scope, name))
    if value is None:
        raise _problem(file, f"no text assigned to {name!r}: not the published file rlver reads")
    return value


def _replace_calls(scope: ast.AST) -> list[list[ast.expr]]:
    """The arguments of every two-argument ``.replace(...)`` call under ``scope``, in source order."""
    calls = [
        node
        for node in ast.walk(scope)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace"
    ]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    return [list(c.args) for c in calls if len(c.args) == 2]


def _replacement(scope: ast.AST, slot: str, file: str) -> str:
    """The literal a ``.replace("{{slot}}", "literal")`` call puts in (the first such call)."""
    for args in _replace_calls(scope):
        literal = _string(args[1])
        if _string(args[0]) == "{{" + slot + "}}" and literal is not None:
            return literal
    raise _problem(file, f"no literal replaces {{{{{slot}}}}}: not the published file rlver reads")


def _subscript_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript):
        return _string(node.slice)
    return None


def _flatten_sum(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [*_flatten_sum(node.left), *_flatten_sum(node.right)]
    return [node]


def _planning_parts(scope: ast.AST, file: str) -> tuple[PlanningPart, ...]:
    """The parts of the ``.replace("{{planning}}", a + planning[k] + ...)`` call, in order."""
    for args in _replace_calls(scope):
        if _string(args[0]) != "{{planning}}" or not isinstance(args[1], ast.BinOp):
            continue
        parts = []
        for piece in _flatten_sum(args[1]):
            literal, key = _string(piece), _subscript_key(piece)
            if literal is None and key is None:
                raise _problem(file, "the appraisal handed to the reply call has a part rlver cannot read")
            parts.append(PlanningPart(text=literal) if literal is not None else PlanningPart(field=key))
        return tuple(parts)
    raise _problem(file, "no appraisal is handed to the reply call: not the published file rlver reads")


def _opening_planning(scope: ast.AST, file: str) -> str:
    """The literal assigned to ``planning['analyse']`` when there is no appraisal (the opening line)."""
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and _subscript_key(node.targets[0]) == "analyse"
        ):
            value = _string(node.value)
            if value is not None:
                return value
    raise _problem(file, "no opening instruction: not the published file rlver reads")


def _speakers(scope: ast.AST, file: str) -> dict[str, str]:
    for node in ast.walk(scope):
        if isinstance(node, ast.Dict):
            keys = [_string(k) for k in node.keys]
            values = [_string(v) for v in node.values]
            if keys == ["user", "assistant"] and all(values):
                return dict(zip(["user", "assistant"], values, strict=True))  # type: ignore[arg-type]
    raise _problem(file, "no speaker names for the history: not the published file rlver reads")


def _tiers(scope: ast.AST, file: str) -> tuple[tuple[str, int], ...]:
    node = _assigned(scope, "emo_count")
    if not isinstance(node, ast.Dict):
        raise _problem(file, "no tier thresholds (emo_count): not the published file rlver reads")
    tiers = []
    for key, value in zip(node.keys, node.values, strict=True):
        name = _string(key)
        if name is None or not isinstance(value, ast.Constant) or not isinstance(value.value, int):
            raise _problem(file, "a tier threshold rlver cannot read")
        tiers.append((name, value.value))
    return tuple(tiers)


def check_slots(template: str, expected: frozenset[str], file: str, which: str) -> str:
    """``template`` when its ``{{slots}}`` are exactly ``expected``; else one InputError (exit 2)."""
    found = set(_SLOT.findall(template))
    unknown, missing = sorted(found - expected), sorted(expected - found)
    if unknown or missing:
        said = []
        if unknown:
            said.append("a slot rlver does not know: " + ", ".join("{{" + s + "}}" for s in unknown))
        if missing:
            said.append("no slot for " + ", ".join("{{" + s + "}}" for s in missing))
        raise _problem(file, f"the {which} template has " + "; ".join(said))
    return template


def _simulator_texts(
    file: str, tree: ast.Module, target: str, appraisal_slots: frozenset[str], reply_slots: frozenset[str]
) -> SimulatorTexts:
    """A simulator file's texts: ``planning_reply``'s and ``player_reply``'s templates (slots checked)
    and what ``player_reply`` splices in."""
    planning, reply = _function(tree, "planning_reply", file), _function(tree, "player_reply", file)
    return SimulatorTexts(
        file=file,
        target=target,
        appraisal_template=check_slots(_text(planning, "template", file), appraisal_slots, file, "appraisal"),
        reply_template=check_slots(_text(reply, "template", file), reply_slots, file, "reply"),
        opening_planning=_opening_planning(reply, file),
        empty_history=_replacement(reply, "dialog_history", file),
        planning_parts=_planning_parts(reply, file),
        speakers=_speakers(reply, file),
        tiers=_tiers(tree, file),
    )


@lru_cache(maxsize=4)
def sage_texts() -> SimulatorTexts:
    """SAGE's benchmark simulator (``sage/simulator_response.py``)."""
    file = "sage/simulator_response.py"
    tree = _tree(file)
    target = _text(tree, "target_prompt", file)
    return _simulator_texts(file, tree, target, SAGE_APPRAISAL_SLOTS, SAGE_REPLY_SLOTS)


@lru_cache(maxsize=4)
def training_texts(target: str = "eq") -> SimulatorTexts:
    """RLVER's training simulator (``rlver/hard_player_simulator_dsv3.py``), with the ``target`` the
    published runs chose (``generate_role("eq")``, dsv3 :68 ``self.generate_role("eq")``)."""
    file = "rlver/hard_player_simulator_dsv3.py"
    tree = _tree(file)
    targets = _assigned(tree, "target_prompt")
    if not isinstance(targets, ast.Dict):
        raise _problem(file, "no target_prompt table: not the published file rlver reads")
    table = {_string(k): _string(v) for k, v in zip(targets.keys, targets.values, strict=True)}
    chosen = table.get(target)
    if not chosen:
        raise _problem(file, f"no target {target!r} in target_prompt")
    return _simulator_texts(file, tree, chosen, TRAINING_APPRAISAL_SLOTS, TRAINING_REPLY_SLOTS)


@lru_cache(maxsize=1)
def sage_loop_texts() -> DialogueLoopTexts:
    """The goodbye words of SAGE's dialogue loop (``sage/test_npc.py``: ``"..." in reply``)."""
    file = "sage/test_npc.py"
    words: list[str] = []
    for node in ast.walk(_tree(file)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
            word = _string(node.left)
            if word and word not in words:
                words.append(word)
    if not words:
        raise _problem(file, "no goodbye words: not the published file rlver reads")
    return DialogueLoopTexts(goodbye_words=tuple(words))


@lru_cache(maxsize=1)
def sage_agent_prompt() -> str:
    """The benchmark agent's system prompt (``sage/npc_response.py``, ``role_system``)."""
    file = "sage/npc_response.py"
    return _text(_function(_tree(file), "call_npc", file), "role_system", file)


@lru_cache(maxsize=1)
def training_agent_prompts() -> dict[bool, str]:
    """The published training's agent prompts by think mode (``rlver/system_prompt.py``)."""
    file = "rlver/system_prompt.py"
    tree = _tree(file)
    return {
        False: _text(tree, "system_prompt_train_unthink", file),
        True: _text(tree, "system_prompt_train_think", file),
    }


def clear_cache() -> None:
    """Forget what was read (tests that swap the data folder)."""
    for fn in (sage_texts, training_texts, sage_loop_texts, sage_agent_prompt, training_agent_prompts):
        fn.cache_clear()
