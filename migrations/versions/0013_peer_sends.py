"""peer sends: the a2a_send tool's calls, one row per call, so a call run again after a crash
never sends twice (issue 54)

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "peer_sends",
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("call_key", sa.Text(), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("peer_task_id", sa.Text(), nullable=True),
        sa.Column("answer", json_type, nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant", "call_key", name=op.f("pk_peer_sends")),
    )
    op.create_index("ix_peer_sends_task", "peer_sends", ["tenant", "task_id"])


def downgrade() -> None:
    op.drop_index("ix_peer_sends_task", table_name="peer_sends")
    op.drop_table("peer_sends")
