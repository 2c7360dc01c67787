"""Team profiles: schema, loading, checks, binding resolution and immutable snapshots.
"""
