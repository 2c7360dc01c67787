"""pytest fixtures for MMO's suite and for third-party plugin authors (pytest11 plugin)."""
