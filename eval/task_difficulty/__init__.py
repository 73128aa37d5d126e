"""Data for the task-difficulty model (issue #15): SWE-bench issue texts joined to labels."""
