"""Operations over a session and its jobs: controls, read views, root runs, the interactive path,
resume admission and smoke.
"""
