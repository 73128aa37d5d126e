"""Offline evaluation harnesses that run tiergate's real routing code over public data.

- `eval.routellm_mmlu`: RouteLLM's MMLU pair (APGR, CPT(50%), CPT(80%)).
- `eval.routerarena`: RouterArena's sub_10 split (accuracy, cost per 1k, arena score).

Outputs go under eval/out/ (gitignored); see docs/request-level-benchmarks.md.
"""
