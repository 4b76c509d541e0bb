"""Bridges to external training frameworks (the scale-out path). Each one is an optional extra."""
