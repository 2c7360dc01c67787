"""Configuration input: TOML reading, settings.toml, credentials.env and the model catalog.
"""
