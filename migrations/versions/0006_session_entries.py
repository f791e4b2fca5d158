"""session entries: the llm agents' one continuous session per (tenant, identity)

Revision ID: 0006
Revises: 0005

One row per saved message with its stable id, unique in the caller's scope so appending an
id that exists is a no-op; read in (rank, id) order, a compaction summary (rank 0) first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_entries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("entry_id", sa.String(length=256), nullable=False),
        sa.Column("rank", sa.SmallInteger(), nullable=False),
        sa.Column(
            "message",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_session_entries")),
        sa.UniqueConstraint(
            "tenant",
            "identity",
            "entry_id",
            name=op.f("uq_session_entries_tenant_identity_entry_id"),
        ),
    )
    op.create_index(
        "ix_session_entries_order", "session_entries", ["tenant", "identity", "rank", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_session_entries_order", table_name="session_entries")
    op.drop_table("session_entries")
