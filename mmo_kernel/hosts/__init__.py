"""The host kit: what every execution host needs to drive an agent (control socket, root socket,
turn failures, evidence, goals, the Codex CLI, WebSocket).
"""
