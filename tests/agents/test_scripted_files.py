"""The scripted agent's Message results and file artifacts (issue 49): ``message <text>``,
``artifact file <filename> <mediaType> <base64>``, ``artifact url <url> <mediaType>
[<filename>]``; the worker keeps a Message result only for open tenants."""

from __future__ import annotations

import pytest

from app.agents.contract import AgentReply
from app.agents.scripted import ScriptedAgent
from app.tasks.outcome import MESSAGE_RESULT_KEY, message_result
from app.worker.agent_call import outcome_of
from tests.agents.helpers import context, user_message


async def run(script: str) -> object:
    return await ScriptedAgent().run(context(user_message(script)))


async def test_message_answers_with_a_message() -> None:
    result = await run("artifact text note\nmessage hello {attempt}")
    assert result == AgentReply(
        text="hello 1",
        artifacts=({"artifactId": "artifact-1", "parts": [{"text": "note"}]},),
        as_message=True,
    )


async def test_a_file_artifact_carries_the_bytes_and_the_filename() -> None:
    result = await run("artifact file report.txt text/plain aGVsbG8=\nreply done")
    assert isinstance(result, AgentReply)
    assert result.artifacts == (
        {
            "artifactId": "artifact-1",
            "parts": [{"raw": "aGVsbG8=", "filename": "report.txt", "mediaType": "text/plain"}],
        },
    )


@pytest.mark.parametrize(
    ("line", "part"),
    [
        (
            "artifact url https://files.example.com/docs/a%20b.pdf application/pdf",
            {
                "url": "https://files.example.com/docs/a%20b.pdf",
                "mediaType": "application/pdf",
                "filename": "a b.pdf",
            },
        ),
        (
            "artifact url https://files.example.com/x?id=1 image/png chart.png",
            {
                "url": "https://files.example.com/x?id=1",
                "mediaType": "image/png",
                "filename": "chart.png",
            },
        ),
        (
            "artifact url https://files.example.com/ text/html",
            {"url": "https://files.example.com/", "mediaType": "text/html"},
        ),
    ],
)
async def test_a_url_artifact_points_at_the_url(line: str, part: dict[str, str]) -> None:
    result = await run(f"{line}\nreply done")
    assert isinstance(result, AgentReply)
    assert result.artifacts == ({"artifactId": "artifact-1", "parts": [part]},)


@pytest.mark.parametrize(
    "line",
    [
        "artifact file report.txt text/plain not*base64",
        "artifact file report.txt text/plain",
        "artifact file a b c d",
        "artifact url ftp://files.example.com/a text/plain",
        "artifact url /relative text/plain",
        "artifact url https://files.example.com/a",
        "message",
    ],
)
async def test_malformed_file_lines_are_echoed(line: str) -> None:
    result = await run(line)
    assert result == AgentReply(text=line)


def test_a_message_result_only_for_open_tenants() -> None:
    reply = AgentReply(text="hi", as_message=True)
    assert outcome_of(reply, message_results=True).message_key == MESSAGE_RESULT_KEY
    # Gateway tenants: a plain reply, the final push stays <taskId>:final (CONTRACT §7).
    assert outcome_of(reply, message_results=False).message_key is None
    assert outcome_of(AgentReply(text="hi"), message_results=True).message_key is None


def test_message_result_reads_only_a_completed_message_answer() -> None:
    message = {"messageId": "t-1:message", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    done = {"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED", "message": message}}
    assert message_result(done) == message
    final = {**message, "messageId": "t-1:final"}
    assert message_result({"id": "t-1", "status": {**done["status"], "message": final}}) is None
    failed = {"id": "t-1", "status": {"state": "TASK_STATE_FAILED", "message": message}}
    assert message_result(failed) is None
