"""The tool-bridge kit: third-party MCP tool-server declarations and the MCP client.
"""
