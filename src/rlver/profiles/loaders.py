"""Read profile files: our own JSONL/YAML and the published (SAGE / RLVER) JSONL format.

Every loader validates *every* row before returning anything. A file with bad rows raises one
:class:`~rlver.errors.InputError` that lists each problem as ``file:line: field: problem``, so a user can
fix the whole file in one pass and a run never starts on half a data set.

The published format (fields ``id, player, scene, main_cha, cha_group, task, first_talk``) keeps the
hidden need at the end of ``scene`` after a heading such as ``####隐藏主题:``. The heading is parsed
tolerantly (any number of ``#``/``*``, ``隐藏主题`` or ``隐藏的主题``, ASCII or full-width colon,
spaces); the *last* such heading wins because a few backgrounds mention ``**隐藏主题：**`` earlier on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from rlver.config_errors import yaml_problem
from rlver.errors import InputError, Problem
from rlver.profiles.schema import PUBLISHED_STYLES, Profile

FileFormat = Literal["native", "published"]

#: Fields that mark a row as the published format.
PUBLISHED_FIELDS = ("id", "player", "scene", "main_cha", "cha_group", "task")
PUBLISHED_OPTIONAL = ("first_talk",)

#: The hidden-need heading: ``####隐藏主题:``, ``## 隐藏的主题：``, ``**隐藏主题：**``, ``Hidden need:``.
_HIDDEN_HEADING = re.compile(
    r"^[ \t]*[#*]*[ \t]*(?:隐藏的?主题|hidden[ \t]+(?:need|theme|topic))[ \t]*\**[ \t]*(?:[:：]|$)[ \t]*\**",
    re.MULTILINE | re.IGNORECASE,
)

#: The eight hidden needs of the published data, by a phrase each contains, with an English label.
_PUBLISHED_NEED_TYPES: tuple[tuple[str, str], ...] = (
    ("自我反思", "self-reflection"),
    ("辩证地分析", "balanced analysis"),
    ("认同你没有错", "validation"),
    ("深刻共情", "deep empathy"),
    ("倾听", "being heard"),
    ("建议", "advice"),
    ("其他人物这么做的原因", "understanding others"),
    ("夸奖", "praise"),
)

_MAX_PROBLEMS_SHOWN = 200


@dataclass
class _Row:
    line: int
    data: Any


def split_hidden_need(scene: str) -> tuple[str, str] | None:
    """Split a published ``scene`` into ``(background, hidden_need)``; ``None`` when no heading is found."""
    matches = list(_HIDDEN_HEADING.finditer(scene))
    if not matches:
        return None
    last = matches[-1]
    background = scene[: last.start()].rstrip()
    need = scene[last.end() :].strip().strip("*").strip()
    return background, need


def published_need_type(hidden_need: str) -> str:
    """The English label of one of the published data's eight hidden needs ("" when unknown)."""
    for phrase, label in _PUBLISHED_NEED_TYPES:
        if phrase in hidden_need:
            return label
    return ""


def is_published_row(row: Any) -> bool:
    return isinstance(row, dict) and "player" in row and "scene" in row


def published_to_dict(row: dict[str, Any], source: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Map a published row to :class:`Profile` fields; also return ``(field, problem)`` pairs found."""
    problems: list[tuple[str, str]] = []
    for name in PUBLISHED_FIELDS:
        if name not in row:
            problems.append((name, "missing (required in the published format)"))
    unknown = sorted(set(row) - set(PUBLISHED_FIELDS) - set(PUBLISHED_OPTIONAL))
    for name in unknown:
        problems.append((name, "unknown field for the published format"))
    for name in ("id", "player", "scene", "main_cha", "task"):
        if name in row and not isinstance(row[name], str):
            problems.append((name, f"expected text, got {type(row[name]).__name__}"))
    if problems:
        return {}, problems

    split = split_hidden_need(row["scene"])
    if split is None:
        problems.append(("scene", "no hidden-need heading (e.g. '####隐藏主题:') found at the end"))
        background, hidden = row["scene"], ""
    else:
        background, hidden = split
        if not hidden:
            problems.append(("scene", "the hidden-need heading is followed by no text"))

    traits = row["cha_group"]
    if isinstance(traits, str):
        traits = [t for t in re.split(r"[,，、;；\s]+", traits) if t]
    if not isinstance(traits, list) or not all(isinstance(t, str) for t in traits):
        problems.append(("cha_group", "expected a list of trait words"))
        traits = []

    opening = row.get("first_talk")
    if opening is not None and not isinstance(opening, str):
        problems.append(("first_talk", f"expected text, got {type(opening).__name__}"))
        opening = None
    style = row["main_cha"].strip()
    data = {
        "id": row["id"],
        "language": "zh",
        "persona": row["player"],
        "background": background,
        "goal": row["task"],
        "hidden_need": hidden,
        "traits": traits,
        "style": PUBLISHED_STYLES.get(style, style),
        "need_type": published_need_type(hidden),
        "opening": opening if opening and opening.strip() else None,
        "source": source,
        "published_scene": row["scene"],
    }
    return data, problems


def _pydantic_problems(
    exc: ValidationError, path: str, line: int, field_map: dict[str, str]
) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        field = ".".join(loc) or None
        if loc and loc[0] in field_map:
            field = field_map[loc[0]]
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        elif err["type"] == "missing":
            message = "missing (required)"
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            if "input" in err and not isinstance(err["input"], (dict, list)):
                shown = repr(err["input"])
                message += f" (got {shown[:60]}{'...' if len(shown) > 60 else ''})"
        out.append(Problem(path, line, field, message))
    return out


#: Which published field a Profile field came from, so errors name the field the user wrote.
_PUBLISHED_FIELD_OF = {
    "persona": "player",
    "background": "scene",
    "goal": "task",
    "hidden_need": "scene",
    "traits": "cha_group",
    "style": "main_cha",
    "opening": "first_talk",
}


def _read_jsonl_rows(path: Path, problems: list[Problem]) -> list[_Row]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(Problem(str(path), None, None, f"cannot read: {exc.strerror or exc}")) from None
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark from some editors
    rows = []
    for i, bline in enumerate(raw.split(b"\n"), start=1):
        if not bline.strip():
            continue
        try:
            rows.append(_Row(i, json.loads(bline.decode("utf-8"))))
        except UnicodeDecodeError:
            problems.append(Problem(str(path), i, None, "not valid UTF-8"))
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(path), i, None, f"not valid JSON: {exc.msg} (column {exc.colno})"))
        except (ValueError, RecursionError) as exc:  # 4300+-digit integers, absurdly deep nesting
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
            problems.append(Problem(str(path), i, None, f"not valid JSON: {why}"))
    return rows


def _read_yaml_rows(path: Path, problems: list[Problem]) -> list[_Row]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(Problem(str(path), None, None, "not valid UTF-8")) from None
    except OSError as exc:
        raise InputError(Problem(str(path), None, None, f"cannot read: {exc.strerror or exc}")) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(yaml_problem(path, exc)) from None
    except (ValueError, RecursionError) as exc:  # 4300+-digit integers, absurdly deep nesting
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise InputError(Problem(str(path), None, None, f"not valid YAML: {why}")) from None
    if data is None:
        return []
    if isinstance(data, dict) and isinstance(data.get("profiles"), list):
        # the value safe_load kept is the *last* 'profiles' key; a merge key (<<) has no node here
        keyed = [v for k, v in getattr(node, "value", []) if getattr(k, "value", None) == "profiles"]
        node = keyed[-1] if keyed else None
        data = data["profiles"]
    if not isinstance(data, list):
        raise InputError(
            Problem(str(path), 1, None, "expected a list of profiles (or a mapping with a 'profiles' list)")
        )
    items = node.value if isinstance(node, yaml.SequenceNode) and len(node.value) == len(data) else None
    return [_Row(items[i].start_mark.line + 1 if items else 1, value) for i, value in enumerate(data)]


def detect_profile_format(rows: Iterable[Any]) -> FileFormat:
    """``published`` when the first object row has the published fields, else ``native``."""
    for row in rows:
        if isinstance(row, dict):
            return "published" if is_published_row(row) else "native"
    return "native"


def load_profiles(path: str | Path, *, source: str | None = None) -> list[Profile]:
    """Load and validate every profile of a JSONL or YAML file (native or published format).

    Raises :class:`InputError` listing every bad row (nothing is returned partially). ``source`` is
    stored on each profile that does not set its own (defaults to the file path).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(Problem(str(p), None, None, "no such file"))
    if p.is_dir():
        raise InputError(Problem(str(p), None, None, "is a folder; expected a .jsonl or .yaml file"))
    problems: list[Problem] = []
    if p.suffix.lower() in (".yaml", ".yml"):
        rows = _read_yaml_rows(p, problems)
    else:
        rows = _read_jsonl_rows(p, problems)
    fmt = detect_profile_format(r.data for r in rows)
    label = source if source is not None else str(p)
    profiles: list[Profile] = []
    first_line_of_id: dict[str, int] = {}
    for row in rows:
        if not isinstance(row.data, dict):
            problems.append(
                Problem(str(p), row.line, None, f"expected an object, got {type(row.data).__name__}")
            )
            continue
        field_map: dict[str, str] = {}
        if fmt == "published":
            if not is_published_row(row.data) and not set(row.data) & set(PUBLISHED_FIELDS[1:]):
                problems.append(Problem(str(p), row.line, None, "not in the published format like line 1"))
                continue
            # A published row with fields missing or mistyped: published_to_dict names each of them.
            data, found = published_to_dict(row.data, label)
            problems.extend(Problem(str(p), row.line, f, m) for f, m in found)
            if found:
                continue
            field_map = _PUBLISHED_FIELD_OF
        else:
            if is_published_row(row.data):
                problems.append(Problem(str(p), row.line, None, "published-format row in a native file"))
                continue
            data = dict(row.data)
            data.setdefault("source", label)
        try:
            profile = Profile.model_validate(data)
        except ValidationError as exc:
            problems.extend(_pydantic_problems(exc, str(p), row.line, field_map))
            continue
        if profile.id in first_line_of_id:
            problems.append(
                Problem(
                    str(p),
                    row.line,
                    "id",
                    f"duplicate id {profile.id!r} (first on line {first_line_of_id[profile.id]})",
                )
            )
            continue
        first_line_of_id[profile.id] = row.line
        profiles.append(profile)
    if problems:
        problems.sort(key=lambda pr: pr.line or 0)  # stable: a row's problems keep their order
        shown = problems[:_MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        if len(problems) == 1:  # one line says it all
            raise InputError(problems)
        summary = f"{p}: {len(problems)} problem(s); nothing was loaded" + (
            f" (first {len(shown)} shown)" if more else ""
        )
        raise InputError(shown, summary=summary)
    if not profiles:
        raise InputError(Problem(str(p), None, None, "contains no profiles"))
    return profiles


def dump_profiles_jsonl(profiles: Iterable[Profile]) -> str:
    """Profiles as native JSONL text (one object a line, unset optional fields left out)."""
    return "".join(json.dumps(pr.model_dump(exclude_none=True), ensure_ascii=False) + "\n" for pr in profiles)
