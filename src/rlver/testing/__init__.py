"""Tools for testing rlver and things built on it: a real OpenAI-compatible HTTP server on 127.0.0.1."""
