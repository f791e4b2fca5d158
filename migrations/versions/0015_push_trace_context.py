"""push trace context: each outbox row keeps the W3C trace context of the turn that queued it,
so its attempts join that turn's trace (issue 53), not the task's latest turn's

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "push_outbox",
        sa.Column(
            "trace_context",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("push_outbox") as batch:
        batch.drop_column("trace_context")
