"""Attachments in the ``llm`` loop's user turn (issue 55): read from the turn store when the
message describes them, images only sniffed JPEG/PNG and only when opted in, a note instead
of the image for a model without vision, documents framed, the session's form of a turn
with images holding their descriptions, never their bytes."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import BinaryContent, ModelRequest

from app.agents.llm.attachments import EARLIER, attachments_of, user_prompt
from app.agents.llm.session import entry_of
from app.attachments.descriptions import described_message
from app.attachments.policy import AttachmentsConfig
from app.attachments.stored import DOCUMENT, IMAGE, Attachment

PNG = b"\x89PNG\r\n\x1a\n" + bytes(300_000)
IMAGES = AttachmentsConfig(images=True)


def _image(data: bytes, index: int = 1) -> Attachment:
    return Attachment(index, IMAGE, "image/png", "a.png", data)


def test_images_by_bytes_only_when_opted_in() -> None:
    found = [_image(PNG), _image(b"GIF89a....", 2)]
    assert user_prompt("look", found, AttachmentsConfig()).live.content == "look"
    part = user_prompt("look", found, IMAGES).live
    assert isinstance(part.content, list) and len(part.content) == 2
    assert isinstance(part.content[1], BinaryContent)
    assert part.content[1].media_type == "image/png"


def test_a_model_without_vision_gets_a_note() -> None:
    turn = user_prompt("look", [_image(PNG)], IMAGES, vision=False)
    assert turn.live is turn.kept
    assert turn.live.content == (
        "look\n\nThe user attached an image this model cannot see: "
        f"[image: a.png, image/png, {len(PNG)} bytes]"
    )


def test_the_session_keeps_the_description_not_the_bytes() -> None:
    turn = user_prompt("look", [_image(PNG)], IMAGES)
    assert turn.kept.content == f"look\n\n[image: a.png, image/png, {len(PNG)} bytes] ({EARLIER})"
    entry = entry_of("task:t:user:m", ModelRequest(parts=[turn.kept]))
    assert entry.text is not None and len(entry.text) < 512 and entry.tokens < 128


def test_documents_framed_when_opted_in() -> None:
    doc = Attachment(1, DOCUMENT, "text/markdown", "n.md", b"#", text="# Notes\nbuy milk")
    assert user_prompt("read", [doc], AttachmentsConfig()).live.content == "read"
    turn = user_prompt("read", [doc], AttachmentsConfig(documents=True))
    content = turn.live.content
    assert turn.kept is turn.live  # the document's text stays in the session
    assert isinstance(content, str) and content.startswith("read\n\n")
    assert 'type="text/markdown">\n# Notes\nbuy milk\n</attachment>' in content


async def test_read_from_the_turn_store_only_when_described() -> None:
    asked: list[str] = []

    async def read(message_id: str) -> Sequence[Attachment]:
        asked.append(message_id)
        return [_image(PNG)]

    plain = {"messageId": "m-1", "parts": [{"text": "hi"}]}
    assert await attachments_of(plain, read) == ()
    described = described_message({**plain, "parts": [{"text": "hi"}, {}]}, [_image(PNG)])
    assert len(await attachments_of(described, read)) == 1
    assert asked == ["m-1"]
