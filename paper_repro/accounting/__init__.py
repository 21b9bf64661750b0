"""FLOP accounting: the analytic FLOP model, what a pass processes, device peaks, the profiler check."""
