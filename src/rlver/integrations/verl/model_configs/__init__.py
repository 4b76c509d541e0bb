"""Shipped config.json files of the models the presets name (facts only, no weights); see README.md."""
