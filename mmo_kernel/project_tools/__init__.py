"""The project-tools contract shared by `mmo serve` and `mmo runner` (spec 12): tool catalog, envelopes, link frames, path rules."""
