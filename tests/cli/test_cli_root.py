import subprocess
import sys
from pathlib import Path

from rlver import __version__


def test_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlver", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("data", "profiles", "config"):
        assert command in out


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rlver", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert __version__ in out


def test_error_messages_are_printed_literally_not_as_markup() -> None:
    """An error naming `[bold]...` (user input, model output) is shown as typed, not styled away."""
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "profiles", "show", "[bold]nope[/bold]"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "[bold]nope[/bold]" in proc.stderr


def test_missing_local_model_folder_is_named(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rlver", "eval", "--agent-local", "/nonexistent/model-folder",
         "--profiles", "en-test", "--simulator", "offline", "--no-report", "--out", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "no model folder at '/nonexistent/model-folder'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_every_command_module_registers_one_way() -> None:
    """cli/__init__.py's docstring: each command module has ``register(app)``, is listed once in
    ``COMMANDS``, and registers nothing at import time (no ``@app.command`` decorator, no module-level
    Typer)."""
    import ast

    import rlver.cli as cli

    targets = [str(e.target) for e in cli.COMMANDS.entries()]
    assert all(t.startswith("rlver.cli.") and t.endswith(":register") for t in targets), targets
    listed = {t.removeprefix("rlver.cli.").removesuffix(":register") for t in targets}
    assert len(listed) == len(cli.COMMANDS), "a module is listed twice in COMMANDS"
    folder = Path(cli.__file__).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if path.stem != "__init__":
            assert ("register" in top_functions) == (path.stem in listed), (
                f"cli/{path.name}: a module with register() must be in COMMANDS, and only those"
            )
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    assert not (
                        isinstance(target, ast.Attribute) and target.attr in ("command", "callback")
                    ), f"cli/{path.name}:{node.lineno}: registered by decorator; use register(app)"
        for stmt in tree.body:
            value = getattr(stmt, "value", None)
            if isinstance(value, ast.Call):
                called = ast.unparse(value.func)
                assert called not in ("plain_typer", "typer.Typer", "build_app") or path.stem == "__init__", (
                    f"cli/{path.name}:{stmt.lineno}: a Typer built at import time; build it in register()"
                )


def test_a_new_command_is_one_module_and_one_line_in_commands() -> None:
    """docs/architecture.md: adding a command = one module with ``register(app)`` + one line in
    ``COMMANDS``. A module made at run time and appended to the table shows in ``--help`` and runs."""
    import types

    import typer
    from typer.testing import CliRunner

    import rlver.cli as cli
    from rlver.registry import Entry, Registry

    module = types.ModuleType("rlver.cli.hello")

    def hello(name: str = typer.Option("world", "--name", help="Who to greet.")) -> None:
        """Say hello."""
        typer.echo(f"hello {name}")

    def register(app: typer.Typer) -> None:
        app.command("hello")(hello)

    module.register = register  # type: ignore[attr-defined]
    commands = Registry("command module", [*cli.COMMANDS.entries(), Entry("hello", "greet", module.register)])
    app = cli.build_app(commands)
    runner = CliRunner()
    listing = runner.invoke(app, ["--help"]).output
    assert "hello" in listing and "Say hello." in listing and "audit" in listing
    done = runner.invoke(app, ["hello", "--name", "rlver"])
    assert done.exit_code == 0 and done.output == "hello rlver\n"
    assert "hello" not in runner.invoke(cli.app, ["--help"]).output  # the real table is untouched
