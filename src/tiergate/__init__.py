"""tiergate: a session-aware LLM gateway for multi-turn agent traffic."""

__version__ = "0.1.0"
