"""docs/config.md is the pydantic models' printout: every field has a description, and the file is
what ``make config-docs`` writes now."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from rlver.cli import config_reference
from rlver.cli.config_reference import missing_descriptions, render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "config.md"


def test_every_config_field_has_a_description() -> None:
    missing = missing_descriptions()
    assert not missing, "config fields without Field(description=...):\n" + "\n".join(missing)


def test_docs_config_md_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/config.md is out of date with the config models: run `make config-docs`"
    )


def test_the_checks_see_a_field_without_a_description_and_a_changed_default(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    class Inner(BaseModel):
        told: int = Field(default=1, description="said")
        untold: int = 2

    class Root(BaseModel):
        inner: Inner = Field(default_factory=Inner, description="a block")

    monkeypatch.setattr(config_reference, "roots", lambda: [("Root", Root)])
    monkeypatch.setattr(config_reference, "variants", lambda: [])
    assert [m.rsplit(".", 2)[-2:] for m in missing_descriptions()] == [["Inner", "untold"]]
    page = render()
    assert (
        "| `inner.told` | integer | `1` | said |" in page and "| `inner.untold` | integer | `2` |  |" in page
    )
