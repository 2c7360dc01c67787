"""The state store: paths, atomic files and locks, strict records, the audit log and process
identity.
"""
