"""The lag read: collection in order (source), lag with time (timed), sampled over a window (sampler)."""
