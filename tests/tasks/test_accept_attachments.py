"""Accepting a message with attachments (issue 55), on both backends: the history keeps a
bounded description, the bytes and a document's text stay with the turn, a retry is answered
before its document is read again, and a document that cannot be read leaves nothing."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from app.attachments.pdf import PdfExtractor, PdfLimits
from app.attachments.policy import AttachmentPolicy
from app.attachments.reading import Documents
from app.attachments.stored import DocumentText
from app.db.documents import RawJson
from app.db.engine import Database
from app.db.models import TaskRow, TurnAttachmentRow, TurnRow
from app.errors import ContentTypeNotSupported, InvalidParams, PayloadTooLarge
from app.settings import Settings
from app.tasks.accept import Acceptor, QueueBound
from app.tasks.cancel import TaskCanceller
from app.tasks.push_secrets import PushSecrets
from app.tasks.retention import purge_expired
from app.tasks.send_params import SendRequest, parse_send_message
from app.tasks.wire import utcnow
from app.tenants.registry import TenantRecord
from app.testing.pdfs import text_pdf
from tests.tasks.conftest import SCOPE

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 64
NOTE = text_pdf(["buy milk"])
TENANT = TenantRecord(
    id=SCOPE.tenant,
    manifest={},
    require_push_config=False,
    agent_kind="llm",
    agent_config={"attachments": {"images": True, "documents": True}},
)


class CountingReader:
    """The real reader (a PDF read in a child process), counting its reads (or failing
    them)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.reads = 0
        self.fail = fail
        self.real = Documents(PdfExtractor(PdfLimits()))

    async def read(self, data: bytes, media_type: str, index: int) -> DocumentText:
        self.reads += 1
        if self.fail:
            raise ContentTypeNotSupported("unreadable", reason="document_unreadable")
        return await self.real.read(data, media_type, index)


def _request(settings: Settings, message_id: str = "m-1", note: bytes = NOTE) -> SendRequest:
    parts = [
        {"text": "look"},
        {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png", "filename": "a.png"},
        {"raw": base64.b64encode(note).decode(), "mediaType": "application/pdf"},
    ]
    params = {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": parts}}
    return parse_send_message(params, tenant=TENANT, targets=settings.push_targets)


async def _count(db: Database, table: Any) -> int:
    async with db.transaction() as session:
        return int((await session.execute(select(func.count()).select_from(table))).scalar_one())


async def _history(db: Database, task_id: str) -> list[dict[str, Any]]:
    found = await db.storage.task_reads.get(SCOPE, task_id, 10)
    task = json.loads(found.text) if isinstance(found, RawJson) else found
    assert task is not None
    return list(task["history"])


@pytest.mark.parametrize("bounded", [False, True])
async def test_history_describes_and_the_turn_keeps_the_bytes(
    database: Database, settings: Settings, bounded: bool
) -> None:
    reader = CountingReader()
    bound = QueueBound(5, 1) if bounded else QueueBound(None, 1)
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), bound, reader)
    accepted = await acceptor.accept(SCOPE, _request(settings))
    assert accepted.created and reader.reads == 1

    (message,) = await _history(database, accepted.task.id)
    assert "raw" not in json.dumps(message)
    text, image, note = message["parts"]
    assert text == {"text": "look"}
    assert image["text"] == f"[image: a.png, image/png, {len(PNG)} bytes]"
    assert image["metadata"]["looping.attachment"] == {
        "kind": "image",
        "mediaType": "image/png",
        "size": len(PNG),
        "filename": "a.png",
    }
    assert note["text"] == f"[document: application/pdf, {len(NOTE)} bytes, 1 page]"

    kept = await database.storage.attachments.of_message(SCOPE, accepted.task.id, "m-1")
    assert [(a.index, a.kind, a.data, a.text) for a in kept] == [
        (1, "image", PNG, None),
        (2, "document", NOTE, "[page 1]\nbuy milk"),
    ]
    other = SCOPE.__class__(tenant=SCOPE.tenant, identity="someone-else")
    assert await database.storage.attachments.of_message(other, accepted.task.id, "m-1") == []

    # A retry is answered with its task before the document is read again.
    again = await acceptor.accept(SCOPE, _request(settings))
    assert not again.created and again.task.id == accepted.task.id
    assert reader.reads == 1
    # The same id with other content is refused, also before any read.
    with pytest.raises(InvalidParams):
        await acceptor.accept(SCOPE, _request(settings, note=text_pdf(["other"])))
    assert reader.reads == 1
    assert await _count(database, TurnAttachmentRow) == 2


async def test_a_document_that_cannot_be_read_leaves_nothing(
    database: Database, settings: Settings
) -> None:
    reader = CountingReader(fail=True)
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), documents=reader)
    with pytest.raises(ContentTypeNotSupported):
        await acceptor.accept(SCOPE, _request(settings))
    for table in (TaskRow, TurnRow, TurnAttachmentRow):
        assert await _count(database, table) == 0
    # Nothing was accepted, so the retry reads (and here is refused) again.
    with pytest.raises(ContentTypeNotSupported):
        await acceptor.accept(SCOPE, _request(settings))
    assert reader.reads == 2


async def test_without_attachments_the_message_is_stored_as_sent(
    database: Database, settings: Settings
) -> None:
    reader = CountingReader()
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), documents=reader)
    params = {"message": {"messageId": "t-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    request = parse_send_message(params, tenant=TENANT, targets=settings.push_targets)
    assert request.attachments == ()
    accepted = await acceptor.accept(SCOPE, request)
    (message,) = await _history(database, accepted.task.id)
    assert message["parts"] == [{"text": "hi"}]
    assert reader.reads == 0 and await _count(database, TurnAttachmentRow) == 0


def test_policy_without_opt_in_keeps_raw_parts(settings: Settings) -> None:
    tenant = TenantRecord(id="t", manifest={}, require_push_config=False)
    assert not AttachmentPolicy().any
    part = {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    params = {"message": {"messageId": "r", "role": "ROLE_USER", "parts": [part]}}
    request = parse_send_message(params, tenant=tenant, targets=settings.push_targets)
    assert request.attachments == () and request.message["parts"] == [part]


async def test_an_image_retry_gets_its_task_from_the_store(
    database: Database, settings: Settings
) -> None:
    """No document to read: no lookup first; the turn key's idempotency answers the retry."""
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), documents=CountingReader())
    part = {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    params = {"message": {"messageId": "i-1", "role": "ROLE_USER", "parts": [part]}}
    request = parse_send_message(params, tenant=TENANT, targets=settings.push_targets)
    first = await acceptor.accept(SCOPE, request)
    again = await acceptor.accept(SCOPE, request)
    assert first.created and not again.created and again.task.id == first.task.id
    assert await _count(database, TurnAttachmentRow) == 1


def test_besides_its_attachments_a_message_keeps_the_default_limit(settings: Settings) -> None:
    image = {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    text = {"text": "x" * 2000}
    params = {"message": {"messageId": "b", "role": "ROLE_USER", "parts": [text, image]}}
    parse_send_message(params, tenant=TENANT, targets=settings.push_targets, rest_limit=4096)
    with pytest.raises(PayloadTooLarge) as refused:
        parse_send_message(params, tenant=TENANT, targets=settings.push_targets, rest_limit=1024)
    assert refused.value.status_code == 413 and refused.value.reason == "message_too_large"
    # Without attachments the same holds for a tenant that opted in ...
    params["message"]["parts"] = [text]
    with pytest.raises(PayloadTooLarge):
        parse_send_message(params, tenant=TENANT, targets=settings.push_targets, rest_limit=1024)
    # ... and for any other the body limit alone applies (checked before parsing).
    plain = TenantRecord(id="t", manifest={}, require_push_config=False)
    parse_send_message(params, tenant=plain, targets=settings.push_targets, rest_limit=1024)


async def test_a_steering_message_keeps_its_attachments_with_its_turn(
    database: Database, settings: Settings
) -> None:
    """A message joining a running task (steering) is stored like a new one: described in
    the history, its bytes with its own turn, found by its messageId."""
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), documents=CountingReader())
    text = {"message": {"messageId": "s-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    started = await acceptor.accept(
        SCOPE, parse_send_message(text, tenant=TENANT, targets=settings.push_targets)
    )
    part = {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png"}
    steer = {
        "message": {
            "messageId": "s-2",
            "taskId": started.task.id,
            "role": "ROLE_USER",
            "parts": [{"text": "and this"}, part],
        }
    }
    request = parse_send_message(steer, tenant=TENANT, targets=settings.push_targets)
    joined = await acceptor.accept(SCOPE, request, steerable=True)
    assert joined.task.id == started.task.id
    first, second = await _history(database, started.task.id)
    assert first["parts"] == [{"text": "hi"}]
    assert second["parts"][1]["metadata"]["looping.attachment"]["kind"] == "image"
    store = database.storage.attachments
    assert [a.data for a in await store.of_message(SCOPE, started.task.id, "s-2")] == [PNG]
    assert await store.of_message(SCOPE, started.task.id, "s-1") == []


async def test_retention_purges_a_tasks_attachments(database: Database, settings: Settings) -> None:
    acceptor = Acceptor(database, PushSecrets(b"x" * 32), documents=CountingReader())
    old = await acceptor.accept(SCOPE, _request(settings, "old"))
    kept = await acceptor.accept(SCOPE, _request(settings, "kept"))
    await TaskCanceller(database, default_history_length=5).cancel(SCOPE, old.task.id)
    async with database.transaction() as session:
        await session.execute(
            update(TaskRow)
            .where(TaskRow.id == old.task.id)
            .values(updated_at=utcnow() - timedelta(days=settings.task_retention_days + 1))
        )
    assert await purge_expired(database, settings) == 1
    store = database.storage.attachments
    assert await store.of_message(SCOPE, old.task.id, "old") == []
    assert len(await store.of_message(SCOPE, kept.task.id, "kept")) == 2
    assert await _count(database, TurnAttachmentRow) == 2
