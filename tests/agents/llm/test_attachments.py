"""Images in the ``llm`` loop's user turn (issue 55): only sniffed JPEG/PNG, only when opted
in, a fixed session-budget estimate, named in summaries."""

from __future__ import annotations

import base64

from pydantic_ai.messages import BinaryContent, ModelRequest

from app.agents.llm.attachments import IMAGE_TOKENS, images_of, user_prompt
from app.agents.llm.compaction import as_text
from app.agents.llm.session import entry_of
from app.attachments.policy import AttachmentsConfig

PNG = b"\x89PNG\r\n\x1a\n" + bytes(300_000)


def _message(*data: bytes) -> dict[str, object]:
    parts: list[dict[str, str]] = [{"text": "look"}]
    parts += [{"raw": base64.b64encode(d).decode(), "mediaType": "image/png"} for d in data]
    return {"parts": parts}


def test_images_by_bytes_only_when_opted_in() -> None:
    message = _message(PNG, b"GIF89a....")
    assert [i.media_type for i in images_of(message)] == ["image/png"]
    assert user_prompt("look", message, AttachmentsConfig()).content == "look"
    part = user_prompt("look", message, AttachmentsConfig(images=True))
    assert isinstance(part.content, list) and isinstance(part.content[1], BinaryContent)


def test_session_budget_and_summary() -> None:
    part = user_prompt("look", _message(PNG), AttachmentsConfig(images=True))
    entry = entry_of("task:t:user:m", ModelRequest(parts=[part]))
    assert IMAGE_TOKENS <= entry.tokens < IMAGE_TOKENS + 200
    assert "user: look\n[image: image/png]" in as_text([ModelRequest(parts=[part])])


def test_documents_framed_when_opted_in() -> None:
    raw = base64.b64encode(b"# Notes\nbuy milk").decode()
    message = {"parts": [{"text": "read"}, {"raw": raw, "mediaType": "text/markdown"}]}
    assert user_prompt("read", message, AttachmentsConfig()).content == "read"
    content = user_prompt("read", message, AttachmentsConfig(documents=True)).content
    assert isinstance(content, str) and content.startswith("read\n\n")
    assert 'type="text/markdown">\n# Notes\nbuy milk\n</attachment>' in content
