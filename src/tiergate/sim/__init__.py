"""Provider simulator: OpenAI-, Anthropic- and Gemini-shaped endpoints on one port,
with deterministic replies, injectable faults and per-key prefix caching.

Entry points: `tiergate.sim.app.create_sim_app` and `tiergate.sim.server.run_sim`.
"""
