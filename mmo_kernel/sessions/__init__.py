"""Session data: records, state transitions, environments, agent homes, creation, retention and
resolution.
"""
