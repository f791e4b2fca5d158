"""All ORM tables; importing this package registers them on ``Base.metadata``."""

from app.db.models.admin_tokens import AdminTokenRow
from app.db.models.attachments import TurnAttachmentRow
from app.db.models.base import Base
from app.db.models.negotiations import NegotiationRow, NegotiationTurnRow, PeerPinRow
from app.db.models.peer_sends import PeerSendRow
from app.db.models.push import PushConfigRow, PushOutboxRow
from app.db.models.session_entries import SessionEntryRow
from app.db.models.subtasks import SubtaskRow
from app.db.models.task_events import TaskEventRow
from app.db.models.tasks import ActorRow, SessionRow, TaskMessageRow, TaskRow, TurnRow
from app.db.models.tenants import TenantRow

__all__ = [
    "ActorRow",
    "AdminTokenRow",
    "Base",
    "NegotiationRow",
    "NegotiationTurnRow",
    "PeerPinRow",
    "PeerSendRow",
    "PushConfigRow",
    "PushOutboxRow",
    "SessionEntryRow",
    "SessionRow",
    "SubtaskRow",
    "TaskEventRow",
    "TaskMessageRow",
    "TaskRow",
    "TenantRow",
    "TurnAttachmentRow",
    "TurnRow",
]
