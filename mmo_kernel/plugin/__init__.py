"""The extension points: hookspecs, the plugin manager and the five typed driver base classes.
"""
