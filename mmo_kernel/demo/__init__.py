"""``mmo demo``: the offline main job on a throw-away repository.
"""
