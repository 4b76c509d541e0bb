"""The one registry type (issue 44, item 1): one wording for an unknown name, lazy entries, the order."""

from __future__ import annotations

import sys

import pytest

from rlver.errors import InputError
from rlver.registry import Entry, Registry, UnknownName, resolve


def _colours() -> Registry[int]:
    """Targets are objects (a string target is always a lazy ``module:attr`` reference)."""
    return Registry("colour", [Entry("red", "warm", 1), Entry("green", "cool", 2)])


def test_an_unknown_name_is_refused_in_one_wording_with_the_nearest_choice() -> None:
    with pytest.raises(UnknownName) as caught:
        _colours().check("gren")
    assert str(caught.value) == "unknown colour 'gren'; did you mean 'green'? known: red, green"


def test_a_name_near_nothing_lists_the_choices_only() -> None:
    with pytest.raises(ValueError, match=r"^unknown colour 'xyz'; known: red, green$"):
        _colours().check("xyz")


def test_a_flag_gets_the_same_message_as_an_input_error_with_exit_2() -> None:
    with pytest.raises(InputError) as caught:
        _colours().check_flag("blu", "--colour")
    assert caught.value.exit_code == 2
    assert str(caught.value) == "--colour: unknown colour 'blu'; known: red, green"


def test_known_names_pass_and_give_their_target_description_and_settings() -> None:
    reg = _colours()
    assert reg.check("red") == "red" and reg.get("green") == 2 and reg.description("red") == "warm"
    assert reg.settings_class("red") is None
    assert reg.names() == ("red", "green") and list(reg) == ["red", "green"] and len(reg) == 2
    assert "red" in reg and "blue" not in reg
    assert reg.help() == "red (warm); green (cool)."


def test_adding_replaces_and_removing_drops() -> None:
    reg = _colours()
    reg.add("red", 11, "warmer")
    reg.add("blue", 3, "cold")
    assert reg.get("red") == 11 and reg.names() == ("red", "green", "blue")
    reg.remove("blue")
    assert "blue" not in reg
    with pytest.raises(UnknownName):
        reg.remove("blue")
    with pytest.raises(ValueError, match="without surrounding spaces"):
        reg.add(" red", 1, "x")


def test_a_lazy_entry_imports_its_module_only_when_asked() -> None:
    name = "rlver_lazy_registry_probe"
    sys.modules.pop(name, None)
    reg: Registry[object] = Registry(
        "thing", [Entry("dumps", "json", "json:dumps", settings="json:JSONEncoder")]
    )
    reg.add("probe", f"{name}:VALUE", "not importable")
    assert reg.help() == "dumps (json); probe (not importable)."  # listing imports nothing
    assert name not in sys.modules
    import json

    assert reg.get("dumps") is json.dumps and reg.settings_class("dumps") is json.JSONEncoder
    with pytest.raises(ModuleNotFoundError):
        reg.get("probe")


def test_resolve_reads_dotted_attributes_and_refuses_a_string_without_a_colon() -> None:
    import os.path

    assert resolve("os:path.join") is os.path.join
    assert resolve(3) == 3
    with pytest.raises(ValueError, match=r"'package\.module:attribute'"):
        resolve("os.path")


def test_only_is_the_same_table_cut_to_some_entries_in_the_same_wording() -> None:
    """A config may name only the simulator kinds built from a spec: ``only`` keeps order and wording."""
    reg = _colours()
    reg.add("blue", 3, "cold")
    cool = reg.only(lambda e: e.description != "warm")
    assert cool.names() == ("green", "blue") and cool.what == "colour"
    with pytest.raises(UnknownName, match=r"^unknown colour 'red'; known: green, blue$"):
        cool.check("red")
    assert reg.names() == ("red", "green", "blue")  # the table itself is untouched


def test_items_pairs_each_name_with_its_loaded_target() -> None:
    import json

    reg: Registry[object] = Registry("thing", [Entry("dumps", "json", "json:dumps"), Entry("one", "1", 1)])
    assert reg.items() == (("dumps", json.dumps), ("one", 1))
