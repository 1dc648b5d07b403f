"""The project's own tools: the benchmarks, the chaos run, the drills and the screenshots."""
