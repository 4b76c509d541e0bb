"""Printing untrusted text (model and simulator output) to a terminal safely."""

from __future__ import annotations

import re

# Untrusted text must not move the cursor, clear the screen or set the window title.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_CHARS = 20_000  # a runaway reply is cut (with a note) so one line cannot flood the terminal


def clean(text: str, limit: int = MAX_CHARS) -> str:
    """Text safe to print: control characters (ANSI escapes included) removed, length bounded."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\t", "    "))
    if len(text) > limit:
        text = text[:limit] + f" … [{len(text) - limit} more characters]"
    return text
