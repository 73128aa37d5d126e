"""Replay harness: sessions turn by turn through the real escalation engine.

- `generator`  the seeded default corpus (400 sessions, five archetypes)
- `corpus`     the JSONL corpus format: load, validate, write
- `features`   per-turn facts from the gateway's own codec, scorers and strike producers
- `harness`    the driver: snapshot -> resolve -> commit per turn on a simulated clock
- `costmodel`  prices and per-provider cache semantics
- `metrics`    the metrics JSON of DESIGN.md
- `experiments`  the seven experiments; `e2e` the HTTP mode; `analysis` targets and findings
- `figures`, `report`  PNGs and Markdown; `pipeline`, `commands`  what the CLI runs

Entry points: `tiergate replay`, `tiergate replay export`, `tiergate replay report`.
"""
