"""Model factories: the tiny local chat model for tests, the demo and benchmarks."""
