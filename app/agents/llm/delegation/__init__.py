"""Delegation for ``llm`` agents: rounds of subtasks run by isolated subagents (issue 50)."""
