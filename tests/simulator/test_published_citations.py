"""Every ``file:line`` citation of the fetched published code, in ``src`` docstrings, comments and field
descriptions (docs/config.md is printed from them) and in every docs page, points at a line that holds
what it cites.

A citation names its file (``simulator_response.py:150``, ``SAGE/test_npc.py:107``, ``dsv3 :91``,
``hard_player_simulator_dsv3.py lines 210-213``, ``SAGE :57``), or is a bare ``:N`` that continues the
file named last before it in the same docstring, comment or table cell (or in the table column's
header). Each (file, lines) cited has a token in :data:`TOKENS` that the cited lines must hold; a new
citation fails here until it gets one, and a citation that moved off its line fails too. A bare
``:N`` whose file cannot be told is refused: write the file.

The published files are read from ``../shared/data/published_code`` (the test skips without them). A
citation of another published file (the RLVER rollouts, the dataset code, the training script) is
checked when ``RLVER_PUBLISHED_REPO`` names a checkout of zzjweb/digitalhuman; tokens for those are
in :data:`REPO_TOKENS`.
"""

from __future__ import annotations

import ast
import functools
import io
import os
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The names a citation gives the fetched files, and the file each is.
FETCHED = {
    "simulator_response.py": "sage/simulator_response.py",
    "npc_response.py": "sage/npc_response.py",
    "test_npc.py": "sage/test_npc.py",
    "hard_player_simulator_dsv3.py": "rlver/hard_player_simulator_dsv3.py",
    "dsv3": "rlver/hard_player_simulator_dsv3.py",
    "system_prompt.py": "rlver/system_prompt.py",
}
#: Other published files a citation may name, by their path in zzjweb/digitalhuman.
REPO = {
    "vllm_rollout_spmd_think.py": "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
    "vllm_rollout_spmd.py": "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
    "rl_dataset.py": "RLVER/code/verl/utils/dataset/rl_dataset.py",
    "url_environment.py": "RLVER/code/verl/environments/url_environment.py",
    "train_rlver.sh": "RLVER/code/train_rlver.sh",
}
#: Names that are files but not published code (rlver's own, or verl's): a bare ``:N`` after one of
#: them is that file's and is not checked here.
ELSEWHERE = (
    "ray_trainer.py", "fsdp_workers.py", "dp_actor.py", "core_algos.py", "torch_functional.py",
    "ppo_trainer.yaml", "README.md", "loaders.py", "sage_en.py", "sage_zh.py", "sage.py",
)  # fmt: skip
_NAMES = "|".join(re.escape(n) for n in sorted([*FETCHED, *REPO, *ELSEWHERE], key=len, reverse=True))
_CITE = re.compile(
    rf"(?P<file>(?<![\w.])(?:{_NAMES}))(?P<lines>(?:`?\s?(?:lines?\s)?:?\d+(?:-\d+)?)(?:,\s?`?:?\d+(?:-\d+)?`?)*)?"
    rf"|(?P<sage>SAGE\s?`?:)(?P<sage_lines>\d+(?:-\d+)?)"
    rf"|(?<![\w`.\[\]\)\d'\"])`?:(?P<bare>\d+(?:-\d+)?)"
)
_LINES = re.compile(r"\d+(?:-\d+)?")


def _texts() -> Iterator[tuple[str, str, str | None]]:
    """``(where, text, column header)``: each docstring and comment block of ``src``, and each line
    (each cell of a table row, with its column's header) of docs/protocol.md."""
    for path in sorted((ROOT / "src").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{where}:{getattr(node, 'lineno', 1)}", doc, None
        block: list[str] = []
        last = -2
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            if block and tok.start[0] != last + 1:
                yield f"{where}:{last}", "\n".join(block), None
                block = []
            block.append(tok.string)
            last = tok.start[0]
        if block:
            yield f"{where}:{last}", "\n".join(block), None
        yield from _descriptions(source, where)
    for page in sorted((ROOT / "docs").glob("*.md")):
        yield from _page(page)


def _descriptions(source: str, where: str) -> Iterator[tuple[str, str, None]]:
    """Each ``description=`` string of a ``Field`` (docs/config.md is printed from them)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "description":
                    text = _joined(keyword.value)
                    if text:
                        yield f"{where}:{keyword.value.lineno}", text, None


def _joined(node: ast.expr) -> str:
    """A description's text: a string, or strings joined by ``+`` / implicit concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _joined(node.left) + _joined(node.right)
    return ""


def _page(page: Path) -> Iterator[tuple[str, str, str | None]]:
    """Each paragraph of a docs page, and each cell of its tables with its column's header."""
    name = f"docs/{page.name}"
    header: list[str] | None = None
    paragraph: list[str] = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fenced ^= line.startswith("```")
        if fenced or line.startswith("```"):  # commands, not citations
            continue
        if not line.startswith("|"):
            header = None
            if line.strip():
                paragraph.append(line)
            elif paragraph:
                yield f"{name}:{number - 1}", "\n".join(paragraph), None
                paragraph = []
            continue
        cells = line.strip().strip("|").split("|")
        if set(line) <= set("|-: "):
            continue
        header = header or cells
        for column, cell in enumerate(cells):
            yield f"{name}:{number}", cell, header[column] if column < len(header) else None
    if paragraph:
        yield f"{name}:end", "\n".join(paragraph), None


@functools.cache
def citations() -> tuple[tuple[str, str | None, str], ...]:
    """``(where, file name or None, lines)`` for every citation; ``None``: a bare ``:N`` whose file
    cannot be told. Read once a session: every source file and docs page is parsed."""
    return tuple(_citations())


def _citations() -> Iterator[tuple[str, str | None, str]]:
    for where, text, column in _texts():
        named = re.search(rf"(?<![\w.])({_NAMES})", column or "")
        last = named.group(1) if named else None
        for m in _CITE.finditer(text):
            if m.group("file"):
                last = m.group("file")
                for lines in _LINES.findall(m.group("lines") or ""):
                    yield where, last, lines
            elif m.group("sage"):
                last = "simulator_response.py"
                yield where, last, m.group("sage_lines")
            else:
                yield where, last, m.group("bare")


def _span(lines: str) -> tuple[int, int]:
    first, _, last = lines.partition("-")
    return int(first), int(last or first)


#: Per fetched file and cited lines, what those lines hold.
TOKENS: dict[tuple[str, str], str] = {
    ("rlver/hard_player_simulator_dsv3.py", "91"): 'role["topic"]',
    ("sage/simulator_response.py", "48"): 'role["topic"]',
    ("rlver/hard_player_simulator_dsv3.py", "394-395"): "PlayerSimulator(self.save_dir)",
    ("rlver/hard_player_simulator_dsv3.py", "68-69"): "self.chat_player(self.role)",
    ("sage/simulator_response.py", "82"): "emotion变化",
    ("sage/simulator_response.py", "89"): "emotion变化",
    ("rlver/hard_player_simulator_dsv3.py", "138"): "emotion变化",
    ("rlver/hard_player_simulator_dsv3.py", "145"): "emotion变化",
    ("rlver/hard_player_simulator_dsv3.py", "325"): "[回复]",
    ("sage/simulator_response.py", "264"): "[回复]",
    ("sage/simulator_response.py", "282-283"): "if not history",
    ("rlver/hard_player_simulator_dsv3.py", "356-360"): "'temperature': 0.5",
    ("sage/simulator_response.py", "301-313"): "time.sleep(3)",
    ("rlver/hard_player_simulator_dsv3.py", "20"): "import *",
    ("rlver/hard_player_simulator_dsv3.py", "27"): "隐藏主题",
    ("rlver/hard_player_simulator_dsv3.py", "35"): "def call_api(prompt",
    ("rlver/hard_player_simulator_dsv3.py", "35-39"): "def call_api",
    ("rlver/hard_player_simulator_dsv3.py", "36-38"): "Implement your own",
    ("rlver/hard_player_simulator_dsv3.py", "44"): "YOUR_API_KEY",
    ("rlver/hard_player_simulator_dsv3.py", "55"): "self.emo_point = 30",
    ("rlver/hard_player_simulator_dsv3.py", "61"): "self.emo_count",
    ("rlver/hard_player_simulator_dsv3.py", "62-64"): "difficulty_prompt",
    ("rlver/hard_player_simulator_dsv3.py", "66"): "data/train_profile.jsonl",
    ("rlver/hard_player_simulator_dsv3.py", "68"): 'self.generate_role("eq")',
    ("rlver/hard_player_simulator_dsv3.py", "69"): "self.chat_player(self.role)",
    ("rlver/hard_player_simulator_dsv3.py", "82"): "random.sample(data,1)",
    ("rlver/hard_player_simulator_dsv3.py", "85"): '"emo_point": self.emo_point',
    ("rlver/hard_player_simulator_dsv3.py", "96-103"): "def chat_player",
    ("rlver/hard_player_simulator_dsv3.py", "97"): "copy.deepcopy(player_data)",
    ("rlver/hard_player_simulator_dsv3.py", "107-173"): 'template = """',
    ("rlver/hard_player_simulator_dsv3.py", "123-128"): "# emotion",
    ("rlver/hard_player_simulator_dsv3.py", "130-145"): "分析维度",
    ("rlver/hard_player_simulator_dsv3.py", "134-137"): "隐藏主题",
    ("rlver/hard_player_simulator_dsv3.py", "137"): "乱码",
    ("rlver/hard_player_simulator_dsv3.py", "166-193"): "{{new_history}}",
    ("rlver/hard_player_simulator_dsv3.py", "178"): 'replace("{{emotion}}",str(emo_point))',
    ("rlver/hard_player_simulator_dsv3.py", "178-193"): 'replace("{{new_history}}",new_his_str)',
    ("rlver/hard_player_simulator_dsv3.py", "197-201"): "'temperature': 0.5",
    ("rlver/hard_player_simulator_dsv3.py", "198"): '"content": prompt',
    ("rlver/hard_player_simulator_dsv3.py", "204-225"): "time.sleep(3)",
    ("rlver/hard_player_simulator_dsv3.py", "208-219"): 'int(planning["change"])',
    ("rlver/hard_player_simulator_dsv3.py", "209-218"): 'replace("\\n\\n","\\n")',
    ("rlver/hard_player_simulator_dsv3.py", "210-213"): 'replace("\\n\\n","\\n")',
    ("rlver/hard_player_simulator_dsv3.py", "219"): 'self.emo_point+=int(planning["change"])',
    ("rlver/hard_player_simulator_dsv3.py", "219-220"): "min(self.emo_point,100)",
    ("rlver/hard_player_simulator_dsv3.py", "220"): "min(self.emo_point,100)",
    ("rlver/hard_player_simulator_dsv3.py", "227-232"): "'Emotion-F'",
    ("rlver/hard_player_simulator_dsv3.py", "235"): "player_data['emo_point'] = self.emo_point",
    ("rlver/hard_player_simulator_dsv3.py", "250-257"): "Emotion-F",
    ("rlver/hard_player_simulator_dsv3.py", "253"): "Emotion-S",
    ("rlver/hard_player_simulator_dsv3.py", "257"): "Emotion-F",
    ("rlver/hard_player_simulator_dsv3.py", "261-290"): "Response:",
    ("rlver/hard_player_simulator_dsv3.py", "262-267"): "隐藏主题",
    ("rlver/hard_player_simulator_dsv3.py", "293-304"): "发言风格",
    ("rlver/hard_player_simulator_dsv3.py", "307-323"): "{{planning}}",
    ("rlver/hard_player_simulator_dsv3.py", "331-339"): "if not planning",
    ("rlver/hard_player_simulator_dsv3.py", "331-353"): 'replace("{{player_type}}",player_data["player"])',
    ("rlver/hard_player_simulator_dsv3.py", "335-336"): "planning['reason']",
    ("rlver/hard_player_simulator_dsv3.py", "352-353"): 'replace("{{player_type}}",player_data["player"])',
    ("rlver/hard_player_simulator_dsv3.py", "364-372"): "reply = call_api(prompt)",
    ("rlver/hard_player_simulator_dsv3.py", "374-375"): 'split("Response:")',
    ("rlver/hard_player_simulator_dsv3.py", "391"): "0626_dsv3_ppo_from240.jsonl",
    ("rlver/hard_player_simulator_dsv3.py", "394-419"): "def clone",
    ("rlver/system_prompt.py", "1"): "system_prompt_train_unthink",
    ("rlver/system_prompt.py", "1-25"): "system_prompt_train_think",
    ("rlver/system_prompt.py", "10"): "system_prompt_train_think",
    ("sage/npc_response.py", "14"): "role_system",
    ("sage/npc_response.py", "14-15"): '"role": "system"',
    ("sage/npc_response.py", "16-20"): 'mes["content"]',
    ("sage/npc_response.py", "22"): "call_llm(history)",
    ("sage/simulator_response.py", "15"): "emo_count",
    ("sage/simulator_response.py", "16-22"): "target_prompt",
    ("sage/simulator_response.py", "19"): "隐藏主题",
    ("sage/simulator_response.py", "24-27"): "def call_llm",
    ("sage/simulator_response.py", "41-51"): "player_data = {",
    ("sage/simulator_response.py", "43"): '"emo_point": 40',
    ("sage/simulator_response.py", "47"): 'role["main_cha"]',
    ("sage/simulator_response.py", "49"): 'role["task"]',
    ("sage/simulator_response.py", "24"): "def call_llm(prompt)",
    ("sage/simulator_response.py", "56-115"): "def planning_reply",
    ("sage/simulator_response.py", "57"): "emotion分析器",
    ("sage/simulator_response.py", "69-74"): "# emotion",
    ("sage/simulator_response.py", "76-89"): "分析维度",
    ("sage/simulator_response.py", "101-102"): "Change:",
    ("sage/simulator_response.py", "105-109"): "{{simulator_role}}",
    ("sage/simulator_response.py", "105-114"): "{{dialog_history}}",
    ("sage/simulator_response.py", "105-131"): "{{dialog_history}}",
    ("sage/simulator_response.py", "111"): "{{emotion}}",
    ("sage/simulator_response.py", "121"): 'replace("{{emotion}}",str(emo_point))',
    ("sage/simulator_response.py", "121-132"): 'replace("{{dialog_history}}",history_str)',
    ("sage/simulator_response.py", "122"): 'target_prompt[player_data["target"]]',
    ("sage/simulator_response.py", "127-131"): "ensure_ascii=False, indent=2",
    ("sage/simulator_response.py", "129-132"): '"content": mes["content"]',
    ("sage/simulator_response.py", "135-161"): "time.sleep(3)",
    ("sage/simulator_response.py", "141-151"): "re.findall",
    ("sage/simulator_response.py", "142-150"): 'replace("：",":").replace("*","")',
    ("sage/simulator_response.py", "143-147"): 'split("Content:")',
    ("sage/simulator_response.py", "150-151"): "max(-10,min(10,",
    ("sage/simulator_response.py", "150-155"): "min(emo_point,100)",
    ("sage/simulator_response.py", "151"): "max(-10,min(10,",
    ("sage/simulator_response.py", "154-155"): "min(emo_point,100)",
    ("sage/simulator_response.py", "155"): "min(emo_point,100)",
    ("sage/simulator_response.py", "163-169"): "'Emotion-F'",
    ("sage/simulator_response.py", "164-169"): "emo_point<10",
    ("sage/simulator_response.py", "176-265"): "def player_reply",
    ("sage/simulator_response.py", "187-194"): "Emotion-F",
    ("sage/simulator_response.py", "190"): "Emotion-S",
    ("sage/simulator_response.py", "194"): "Emotion-F",
    ("sage/simulator_response.py", "198-229"): "Response:",
    ("sage/simulator_response.py", "222-229"): "Thinking:",
    ("sage/simulator_response.py", "232-243"): "发言风格",
    ("sage/simulator_response.py", "246-250"): "{{player_topic}}",
    ("sage/simulator_response.py", "246-262"): "{{planning}}",
    ("sage/simulator_response.py", "261-262"): "{{emotion}}",
    ("sage/simulator_response.py", "272-275"): "if not planning",
    ("sage/simulator_response.py", "273-297"): 'replace("{{new_history}}",new_his_str)',
    ("sage/simulator_response.py", "277"): "planning['TargetCompletion']",
    ("sage/simulator_response.py", "279"): 'replace("{{emotion}}",emo_state)',
    ("sage/simulator_response.py", "282-297"): "if not history",
    ("sage/simulator_response.py", "307-308"): 'split("Response:")',
    ("sage/simulator_response.py", "322-333"): "def chat_player",
    ("sage/test_npc.py", "90-94"): "turns>10",
    ("sage/test_npc.py", "93"): "turns>10",
    ("sage/test_npc.py", "96-97"): "first_talk",
    ("sage/test_npc.py", "97"): "first_talk",
    ("sage/test_npc.py", "107"): '"再见" in',
    ("sage/test_npc.py", "107-108"): '"再见" in',
    ("sage/test_npc.py", "107-111"): '"emotion-point"]>=100',
    ("sage/test_npc.py", "110"): '"emotion-point"]<10',
    ("sage/test_npc.py", "113-115"): 'call_npc(player["history"])',
    ("sage/test_npc.py", "114-115"): '"content": query',
}
#: The same for the other published files (checked with ``RLVER_PUBLISHED_REPO``).
REPO_TOKENS: dict[tuple[str, str], str] = {
    ("RLVER/code/train_rlver.sh", "24"): "train_batch_size=32",
    ("RLVER/code/train_rlver.sh", "26-27"): "max_response_length=10000",
    ("RLVER/code/train_rlver.sh", "30"): "kl_coef=0.0",
    ("RLVER/code/train_rlver.sh", "34"): "optim.lr=1e-6",
    ("RLVER/code/train_rlver.sh", "35"): "lr_warmup_steps_ratio=0.02",
    ("RLVER/code/train_rlver.sh", "36"): "ppo_mini_batch_size=32",
    ("RLVER/code/train_rlver.sh", "39"): "use_kl_loss=False",
    ("RLVER/code/train_rlver.sh", "46"): "per_turn_length=5000",
    ("RLVER/code/train_rlver.sh", "47"): "max_turns=8",
    ("RLVER/code/train_rlver.sh", "48"): "YOUR_API_URL",
    ("RLVER/code/train_rlver.sh", "51"): "rollout.n=1",
    ("RLVER/code/train_rlver.sh", "60"): "critic.optim.lr=5e-6",
    ("RLVER/code/train_rlver.sh", "61"): "lr_warmup_steps_ratio=0.05",
    ("RLVER/code/train_rlver.sh", "63"): "critic.ppo_mini_batch_size=32",
    ("RLVER/code/train_rlver.sh", "73"): "val_before_train=False",
    ("RLVER/code/train_rlver.sh", "78"): "test_freq=999999",
    ("RLVER/code/train_rlver.sh", "80"): "total_training_steps=1000",
    ("RLVER/code/verl/environments/url_environment.py", "37-38"): "np.maximum(reward_batched, 0)",
    ("RLVER/code/verl/environments/url_environment.py", "38"): "np.maximum(reward_batched, 0)",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "28"): "system_prompt import *",
    (
        "RLVER/code/verl/utils/dataset/rl_dataset.py",
        "31",
    ): "# from verl.workers.rollout.vllm_rollout.benchmark_simulator_depolyed",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "32"): "benchmark_simulator_easier_depolyed import",
    (
        "RLVER/code/verl/utils/dataset/rl_dataset.py",
        "33-34",
    ): "# from verl.workers.rollout.vllm_rollout.hard_player_simulator_dsv3",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "164"): "YOUR_DIR_TO_SAVE_SIMULATOR_LOG",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "167"): "PlayerSimulator(simulator_dir)",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "167-169"): "reply(None)",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "175"): "system_prompt_trained",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "211"): "system_prompt_trained",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "303"): "system_prompt_trained",
    ("RLVER/code/verl/utils/dataset/rl_dataset.py", "332"): "system_prompt_trained",
    ("RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", "446-450"): ".clone()",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
        "494-504",
    ): ".reply(extracted_content)",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
        "496-504",
    ): "extracted_content = content",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
        "518",
    ): "turn_count>self.config.environment.max_turns",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
        "521",
    ): "or player_simulators[i].emo_point<=0",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "402-406",
    ): 'split("</think>")[-1].strip()',
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "402-411",
    ): 'split("</think>")[-1].strip()',
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "407-410",
    ): '"你：" in extracted_content',
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "555",
    ): "self.extract_content(content)",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "555-556",
    ): '"content":extracted_content_1',
    ("RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py", "561"): "run_jack.py",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "564-570",
    ): '.reply(swapped_messages["content"])',
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "582",
    ): "dialogue_turns[original_idx] > self.config.environment.max_turns",
    ("RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py", "585"): "emo_point<=0",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "607-614",
    ): "len(prompt_with_chat_template) <= self.config.prompt_length",
    (
        "RLVER/code/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd_think.py",
        "683-691",
    ): "for _ in range(dialogue_turns[i])",
}


def _check(
    files: dict[str, str], tokens: dict[tuple[str, str], str], read: Callable[[str], str]
) -> list[str]:
    """Every citation of ``files`` whose lines do not hold its token, or that has none."""
    wrong = []
    for where, name, lines in citations():
        if name is None:
            wrong.append(f"{where}: ':{lines}' names no file; write the file before it")
            continue
        if name not in files:
            continue
        key = (files[name], lines)
        token = tokens.get(key)
        if token is None:
            wrong.append(f"{where}: {name}:{lines} has no token in the test's table {key}")
            continue
        text = read(files[name])
        first, last = _span(lines)
        cited = "\n".join(text.splitlines()[first - 1 : last])
        if token not in cited:
            wrong.append(f"{where}: {name}:{lines} does not hold {token!r}")
    return sorted(set(wrong))


def test_every_citation_of_the_fetched_code_holds_what_it_cites(shared_data: Path) -> None:
    code = shared_data / "published_code"
    wrong = _check(FETCHED, TOKENS, lambda f: (code / f).read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)


def test_the_table_lists_no_citation_that_is_gone() -> None:
    cited = {(FETCHED[n], lines) for _, n, lines in citations() if n in FETCHED}
    cited |= {(REPO[n], lines) for _, n, lines in citations() if n in REPO}
    assert not sorted(set(TOKENS) - cited), "tokens for citations no longer made"
    assert not sorted(set(REPO_TOKENS) - cited), "tokens for citations no longer made"


@pytest.mark.skipif(not os.environ.get("RLVER_PUBLISHED_REPO"), reason="RLVER_PUBLISHED_REPO not set")
def test_every_citation_of_the_other_published_files_holds_what_it_cites() -> None:
    repo = Path(os.environ["RLVER_PUBLISHED_REPO"])
    wrong = _check(REPO, REPO_TOKENS, lambda f: (repo / f).read_text(encoding="utf-8"))
    assert not wrong, "\n".join(wrong)
