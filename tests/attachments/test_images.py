"""The attachment checks on their own (issue 55): the opt-in, sniffing and each refusal."""

from __future__ import annotations

import pytest
from a2a.types import Part

from app.agents.contract import AgentReply
from app.agents.echo import EchoAgent
from app.attachments.images import (
    MAX_IMAGE_BYTES,
    check_attachments,
    describe_part,
    sniff_image,
)
from app.attachments.policy import AttachmentPolicy, policy_of, with_input_modes
from app.errors import ContentTypeNotSupported
from tests.agents.helpers import context

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64
IMAGES = AttachmentPolicy(images=True)


def _refusal(parts: list[Part], policy: AttachmentPolicy = IMAGES) -> str:
    with pytest.raises(ContentTypeNotSupported) as caught:
        check_attachments(parts, policy)
    assert caught.value.code == -32005
    return caught.value.metadata["attachment"]


def test_sniffs_by_bytes() -> None:
    assert sniff_image(PNG) == "image/png"
    assert sniff_image(JPEG) == "image/jpeg"
    assert sniff_image(b"GIF89a") is None


def test_accepts_images_declared_right_or_undeclared() -> None:
    parts = [Part(text="look"), Part(raw=PNG, media_type="image/png"), Part(raw=JPEG)]
    checked = check_attachments(parts, IMAGES)
    assert [(c.index, c.kind, c.media_type) for c in checked] == [
        (1, "image", "image/png"),
        (2, "image", "image/jpeg"),
    ]


def test_refusals() -> None:
    assert _refusal([Part(raw=PNG, media_type="image/jpeg")]) == "attachment_type_mismatch"
    assert _refusal([Part(raw=b"GIF89a...", media_type="image/gif")]) == (
        "attachment_type_unsupported"
    )
    assert _refusal([Part(url="https://example.com/a.png")]) == "attachment_url_refused"
    big = b"\x89PNG\r\n\x1a\n" + b"\x00" * MAX_IMAGE_BYTES
    assert _refusal([Part(raw=big)]) == "image_too_large"
    assert _refusal([Part(raw=PNG)] * 5) == "too_many_images"
    check_attachments([Part(raw=PNG)] * 4, IMAGES)


def test_documents_alone_accept_no_image() -> None:
    assert _refusal([Part(raw=PNG)], AttachmentPolicy(documents=True)) == (
        "attachment_type_unsupported"
    )


def test_without_opt_in_nothing_is_checked() -> None:
    assert check_attachments([Part(url="https://example.com/a.png")], AttachmentPolicy()) == []


def test_policy_fails_closed() -> None:
    assert policy_of({"attachments": {"images": True}}).images
    assert not policy_of({"attachments": {"images": "yes"}}).any
    assert not policy_of({"attachments": ["images"]}).any
    assert not policy_of({"attachments": {"images": True, "audio": True}}).any
    assert not policy_of({}).any


def test_input_modes_and_body_limit() -> None:
    manifest = {"name": "x", "defaultInputModes": ["text/plain", "image/png"]}
    modes = with_input_modes(manifest, IMAGES)["defaultInputModes"]
    assert modes == ["text/plain", "image/png", "image/jpeg"]
    assert with_input_modes(manifest, AttachmentPolicy()) is manifest
    assert IMAGES.body_limit(100, images=600, documents=1200) == 600
    assert AttachmentPolicy(documents=True).body_limit(100, images=600, documents=1200) == 1200
    assert AttachmentPolicy().body_limit(100, images=600, documents=1200) == 100


def test_description_is_bounded() -> None:
    assert describe_part({"raw": "iVBORw0KGgo=", "mediaType": "image/png"}) == (
        "[image: image/png, 8 bytes]"
    )
    assert describe_part({"text": "hi"}) is None


async def test_echo_names_files_by_description() -> None:
    ctx = context({"parts": [{"text": "hi"}, {"raw": "iVBORw0KGgo=", "mediaType": "image/png"}]})
    reply = await EchoAgent().run(ctx)
    assert isinstance(reply, AgentReply)
    assert reply.text == "hi\n[image: image/png, 8 bytes]"
