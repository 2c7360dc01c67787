"""The project-tools contract shared by `mmo serve` and `mmo runner` (spec 12).

The tool catalog, result envelopes, runner-link frames and project path rules.
"""
