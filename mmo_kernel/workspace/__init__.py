"""The isolator kit: captured patches and write scopes.
"""
