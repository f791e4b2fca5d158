"""A subagent request's fingerprint: SHA-256 (hex) of its canonical JSON.

It covers what decides the subagent's work (the task and subtask ids, the type, the recipe as
declared, the prompt, the sorted params) and leaves out what may differ between two runs of
the same request: the date line of the system prompt and the model ids (the host's pair may
change; the recipe cannot name one). A finished subtask's result is kept under it; a retried
round with the same request reuses it, a different request under the same id is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from app.agents.llm.delegation.config import Recipe

FINGERPRINT_VERSION = 1


def canonical_request(
    task_id: str, subtask_id: int, recipe: Recipe, prompt: str, params: Mapping[str, str]
) -> str:
    doc = {
        "v": FINGERPRINT_VERSION,
        "task_id": task_id,
        "subtask_id": subtask_id,
        "type": recipe.key,
        "recipe": {
            "key": recipe.key,
            "version": recipe.version,
            "system_prompt": recipe.system_prompt,
            "tools": list(recipe.tools),
            "limits": recipe.limits.model_dump(exclude_none=True),
            "history_window": recipe.history_window,
        },
        "prompt": prompt,
        "params": dict(sorted(params.items())),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(
    task_id: str, subtask_id: int, recipe: Recipe, prompt: str, params: Mapping[str, str]
) -> str:
    canonical = canonical_request(task_id, subtask_id, recipe, prompt, params)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
