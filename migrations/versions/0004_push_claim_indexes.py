"""push claim indexes: the due index in claim order, and the rows on the wire

Revision ID: 0004
Revises: 0003

Why (found by audit): after a receiver outage left a few thousand due rows, the claim took
seconds per call, and every process's claim waits behind it (one advisory lock), so delivery
fell to a few pushes a second. Its "no row of this task on the wire" test scanned every
pending row once per candidate (no index had ``lease_until``), and ordering by
``(next_attempt_at, id)`` sorted every due row before the ``LIMIT``. With the due index in
claim order the scan stops at the limit, and the partial index holds only the rows being sent.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_ON_WIRE = "status = 'pending' AND lease_until IS NOT NULL"


def upgrade() -> None:
    op.drop_index("ix_push_outbox_due", table_name="push_outbox")
    op.create_index(
        "ix_push_outbox_due", "push_outbox", ["status", "next_attempt_at", "id"], unique=False
    )
    op.create_index(
        "ix_push_outbox_on_wire",
        "push_outbox",
        ["tenant", "task_id"],
        unique=False,
        postgresql_where=sa.text(_ON_WIRE),
        sqlite_where=sa.text(_ON_WIRE),
    )


def downgrade() -> None:
    op.drop_index("ix_push_outbox_on_wire", table_name="push_outbox")
    op.drop_index("ix_push_outbox_due", table_name="push_outbox")
    op.create_index(
        "ix_push_outbox_due", "push_outbox", ["status", "next_attempt_at"], unique=False
    )
