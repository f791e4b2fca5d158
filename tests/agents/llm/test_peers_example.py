"""The example directory of peers (examples/llm-peers-agent.json, issue 54) is a complete
``llm`` config: one peer edge reached with an edge token, one A2A agent with a bearer token
read from the worker's environment; the file names the variable, never a credential."""

from __future__ import annotations

import json
from pathlib import Path

from a2a.types import Artifact, Part, Task, TaskState, TaskStatus

from app.agents.llm.config import parse_llm_config
from app.agents.llm.peer_directory import EDGE_TOKEN, credential_in
from app.peers.answers import MAX_REFERENCES, MAX_TEXT_BYTES, render, task_answer
from app.peers.directory import resolve

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llm-peers-agent.json"


def test_the_example_directory_parses_and_holds_no_credential() -> None:
    doc = json.loads(EXAMPLE.read_text())
    config = parse_llm_config(doc)
    desk, translator = config.agents["travel-desk"], config.agents["translator"]
    assert (desk.auth, desk.tenant, desk.bearer_env) == (EDGE_TOKEN, "travel-desk", None)
    assert (translator.bearer_env, translator.tenant) == ("TRANSLATOR_TOKEN", None)
    assert credential_in(doc["agents"]) is None
    assert not config.allow_http_loopback  # the example names https peers only


def test_the_example_passes_a_peers_whole_32_kib_answer_to_the_model() -> None:
    """The default tool output cap (16 KiB) would cut an A2A answer to about half; the
    example raises it so the whole bounded answer, references included, reaches the model."""
    config = parse_llm_config(json.loads(EXAMPLE.read_text()))
    peer = resolve(config, "translator")
    refs = [
        Part(url=f"{peer.origin}/files/{i}-{'x' * 300}.pdf", media_type="application/pdf")
        for i in range(MAX_REFERENCES)
    ]
    parts = [Part(text='é"\n' * 100_000), *refs]
    done = Task(id="p-1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    done.artifacts.append(Artifact(artifact_id="a1", name="answer", parts=parts))
    text = render(task_answer(peer, done), max_bytes=config.max_tool_output_bytes)
    got = json.loads(text.partition("\n")[2])
    escaped = len(json.dumps(got["text"], ensure_ascii=False).encode()) - 2
    assert got["truncated"] is True and MAX_TEXT_BYTES - 8 <= escaped <= MAX_TEXT_BYTES
    assert len(got["artifacts"]) == MAX_REFERENCES and len(text.encode()) <= 49152
