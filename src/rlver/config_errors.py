"""What a config error says: which key, in which file and line or flag, what was expected.

:func:`rlver.config.load_layers` merges a config from :class:`ConfigLayer` s; when pydantic refuses the
result, :func:`format_validation_error` turns each problem into one line naming the layer the bad key
came from (a typo in ``--set`` is not blamed on the preset it overrides), the nearest known key for a
typo, and the allowed range of a number out of bounds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from rlver.errors import Problem, nearest
from rlver.redaction import is_secret_key, mask_secret_tokens, mask_secret_values


class ConfigLayer(NamedTuple):
    """One source of a config's keys: a YAML file (``path`` set), the command's flags, a default.

    :func:`load_layers` merges layers in order and, when validation fails, names the layer each bad
    key came from: a typo in ``--set`` must not be blamed on the preset file it overrides.
    """

    source: str
    data: Mapping[str, Any]
    path: Path | None = None
    #: the flag that set each dotted key of ``data`` (``{"seed": "--seed"}``): an error names the flag
    flags: Mapping[str, str] | None = None


def _has_key(data: Any, loc: Sequence[str]) -> int:
    """How many leading parts of ``loc`` lead through ``data`` (0: not even the first)."""
    depth = 0
    for part in loc:
        if not isinstance(data, Mapping) or part not in data:
            break
        data = data[part]
        depth += 1
    return depth


def _yaml_line(path: Path, loc: Sequence[str]) -> int | None:
    """The line of the deepest key of ``loc`` written in the YAML file ``path`` (None: not found)."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError):
        return None
    line = None
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        # the last of duplicated keys is the one safe_load keeps
        found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part]
        if not found:
            break
        key, node = found[-1]
        line = key.start_mark.line + 1
    return line


def duplicate_key(path: Path, text: str) -> str | None:
    """``FILE:LINE: ...`` for the first key written twice in one mapping of the YAML ``text``, or None.

    Why: YAML loaders keep the last of two equal keys without a word, so ``run: {steps: 2, steps: 3}``
    ran 3 steps and a setting pasted twice in a long config silently overrode the first. A ``<<``
    merge key is left alone (it is meant to be overridden).
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return None
    todo: list[tuple[Any, str]] = [(root, "")]
    while todo:
        node, prefix = todo.pop()
        if isinstance(node, yaml.SequenceNode):
            todo.extend((item, prefix) for item in node.value)
        if not isinstance(node, yaml.MappingNode):
            continue
        first: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag.endswith(":merge"):
                continue
            line = key.start_mark.line + 1
            dotted = f"{prefix}{key.value}"
            if key.value in first:
                return (
                    f"{path}:{line}: duplicate key {dotted} (first on line {first[key.value]}); "
                    f"YAML would silently keep the last one: keep one of them"
                )
            first[key.value] = line
            todo.append((value, f"{dotted}."))
    return None


def _model_types(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models in a field's annotation (through ``X | None``, ``list[X]``, ``Annotated``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _model_types(arg)]


def known_keys(model: type[BaseModel], prefix: str = "", depth: int = 0) -> list[str]:
    """Every dotted key ``model`` accepts (``optim.actor_lr``, ...), its subclasses' keys included
    (a section typed by a base class, such as ``algorithm``, takes the keys of each algorithm)."""
    classes = [model]
    for cls in classes:  # grows while it is read: subclasses of subclasses too
        classes += [sub for sub in cls.__subclasses__() if sub not in classes]
    keys: list[str] = []
    for cls in classes:
        for name, field in cls.model_fields.items():
            key = prefix + (field.alias or name)
            keys.append(key)
            if depth < 8:
                for sub in _model_types(field.annotation):
                    keys += known_keys(sub, key + ".", depth + 1)
    return list(dict.fromkeys(keys))


def _nearest_key(key: str, model: type[BaseModel]) -> str:
    """``"; did you mean KEY?"`` for an unknown ``key`` (the nearest key of the same section), else
    the section's keys when they are few; ``""`` when neither helps."""
    parent, _, last = key.rpartition(".")
    siblings = {k.rpartition(".")[2]: k for k in known_keys(model) if k.rpartition(".")[0] == parent}
    near = nearest(last, siblings)
    if near:
        return f"; did you mean {siblings[near]}?"
    if 0 < len(siblings) <= 12:
        return f"; the keys of {parent or 'the top level'}: {', '.join(siblings)}"
    return ""


def _origin(loc: Sequence[str], layers: Sequence[ConfigLayer], overrides: Sequence[str]) -> tuple[str, str]:
    """Where the value at ``loc`` came from, and the key to name after it (``""``: the source says it).

    An override names itself (``--set optim.x``); otherwise the layer that set the deepest part of
    ``loc`` (a later layer wins a tie), with the line of a YAML file.
    """
    key = ".".join(loc)
    if loc:
        for item in reversed(overrides):
            over = item.partition("=")[0].strip()
            if over == key:
                return f"--set {over}", ""
            if key.startswith(over + ".") or over.startswith(key + "."):
                return f"--set {over}", key
    depths = [_has_key(layer.data, loc) for layer in layers]
    best = max(range(len(layers)), key=lambda i: (depths[i], i), default=None)
    if best is None or depths[best] == 0:  # not set anywhere (a missing key, a check of the whole)
        named = [layer for layer in layers if layer.data] or list(layers)
        if not named:
            return "config", key or "(root)"
        layer, depth = named[-1], 0
    else:
        layer, depth = layers[best], depths[best]
    flag = (layer.flags or {}).get(key)
    if flag is not None:
        return flag, ""
    line = _yaml_line(layer.path, loc[: depth or 1]) if layer.path is not None else None
    where = layer.source if line is None else f"{layer.source}:{line}"
    return where, key or "(root)"


#: pydantic error types that a number out of its range gives: the message adds the allowed range
_NUMBER_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number",
     "int_parsing", "int_from_float", "float_parsing", "int_type", "float_type"}
)  # fmt: skip


_OPERATORS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _with_subclasses(classes: Sequence[type[BaseModel]]) -> list[type[BaseModel]]:
    found = list(classes)
    for cls in found:  # grows while it is read
        found += [sub for sub in cls.__subclasses__() if sub not in found]
    return found


def _number_annotation(model: type[BaseModel], loc: Sequence[str]) -> tuple[Any, list[Any]] | None:
    """The annotation and constraints of the number at ``loc`` (a field, or an item of a tuple field)."""
    classes, annotation, metadata = [model], None, []
    for part in loc:
        if annotation is not None and part.isdigit():  # an item of ``tuple[Annotated[float, ...], ...]``
            items = get_args(annotation)
            if int(part) >= len(items):
                return None
            annotation, metadata = items[int(part)], []
            continue
        field = next(
            (c.model_fields[part] for c in _with_subclasses(classes) if part in c.model_fields), None
        )
        if field is None:
            return None
        annotation, metadata = field.annotation, list(field.metadata)
        classes = _model_types(annotation)
    return (annotation, metadata) if annotation is not None else None


def _bounds(annotation: Any, metadata: Sequence[Any]) -> tuple[dict[str, Any], bool]:
    """``{"ge": 0, "le": 1}``-style bounds of a number, through ``Annotated`` and ``X | None``, and
    whether it is an integer."""
    found = {op: getattr(m, op) for m in metadata for op in _OPERATORS if getattr(m, op, None) is not None}
    is_int = annotation is int
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is Annotated:
            base, *extra = get_args(arg)
            is_int = is_int or base is int
            inner = [m for info in extra for m in getattr(info, "metadata", [info])]
            found.update(
                {op: getattr(m, op) for m in inner for op in _OPERATORS if getattr(m, op, None) is not None}
            )
        is_int = is_int or arg is int
    return found, is_int


def allowed_range(model: type[BaseModel], loc: Sequence[str]) -> str | None:
    """The range a number setting takes, in words (``an integer from 0 to 4294967295``, ``a finite
    number > 0``), read from the field's own constraints: the one home of each bound."""
    found = _number_annotation(model, loc)
    if found is None:
        return None
    bounds, is_int = _bounds(*found)
    kind = "an integer" if is_int else "a finite number"
    low, high = bounds.get("ge"), bounds.get("le")
    if low is not None and high is not None and len(bounds) == 2:
        return f"{kind} from {low} to {high}"
    if not bounds:
        return kind
    return f"{kind} " + " and ".join(f"{_OPERATORS[op]} {value}" for op, value in bounds.items())


def _describe(
    err: Any, model: type[BaseModel], layers: Sequence[ConfigLayer], overrides: Sequence[str]
) -> str:
    """One validation error as ``WHERE: KEY: problem``."""
    loc = [str(p) for p in err["loc"]]
    where, key = _origin(loc, layers, overrides)
    if not loc and err["type"] == "value_error":
        # a check of several settings together: its message names them; the whole block is no value.
        # When a --set gave one of the keys it names, that flag is the source, not the file below it
        # (`--set rollout.n_per_profile=1` with GRPO was blamed on the preset).
        text = str(err["ctx"]["error"])
        given = [o.partition("=")[0].strip() for o in overrides]
        named = [k for k in given if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", text)]
        return f"{f'--set {named[-1]}' if named else where}: {text}"
    head = f"{where}: {key}" if key else where
    if err["type"] == "extra_forbidden":
        return f"{head}: unknown key{_nearest_key('.'.join(loc), model)}"
    # the input may be a key pasted into the wrong field: never print one back. A value refused by a
    # key-variable field (``api_key_env``) is hidden whatever it looks like: short or unusual keys slip
    # past the token pattern.
    field = loc[-1] if loc else ""
    if field.endswith("key_env") or is_secret_key(field):
        shown = "'***'"
    else:
        shown = mask_secret_tokens(repr(mask_secret_values(err.get("input"))))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    allowed = allowed_range(model, loc) if err["type"] in _NUMBER_ERRORS else None
    tail = f"; allowed: {allowed}" if allowed else ""
    message = mask_secret_tokens(str(err["msg"]).removeprefix("Value error, "))
    if err["type"] == "value_error" and err.get("input") is None:
        return f"{head}: {message}{tail}"  # a setting left out: nothing was given to show
    return f"{head}: {message} (got {shown}){tail}"


def format_validation_error(
    exc: ValidationError, model: type[BaseModel], layers: Sequence[ConfigLayer], overrides: Sequence[str]
) -> str:
    """One line for one problem; a count and one indented line each for several."""
    problems = [_describe(err, model, layers, overrides) for err in exc.errors()]
    if len(problems) == 1:
        return problems[0]
    return f"invalid configuration ({len(problems)} problems):\n" + "\n".join(f"  {p}" for p in problems)


def yaml_problem(path: str | Path, exc: yaml.YAMLError) -> Problem:
    """A YAML parser's error as one :class:`Problem`, ``file:line:col: not valid YAML: what``, instead
    of pyyaml's five-line dump with its ``"<unicode string>"`` and a caret. A tab gets its fix."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    message = f"not valid YAML: {problem}" + (f" ({context})" if context else "")
    if "\\t" in problem:  # pyyaml quotes a tab as backslash-t
        message += "; YAML indents with spaces, not tabs"
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
    return Problem(str(path), line, None, message, column=column)
