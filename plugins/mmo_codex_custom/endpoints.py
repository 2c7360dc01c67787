"""The upstream endpoint of each wire protocol, below a route's ``base_url``."""

ENDPOINTS = {"openai_responses": "/responses", "openai_chat": "/chat/completions",
             "anthropic_messages": "/messages"}
