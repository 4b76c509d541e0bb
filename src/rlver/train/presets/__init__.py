"""Bundled training presets (YAML); ``rlver train --config NAME`` finds them here."""
