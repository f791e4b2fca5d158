"""push tables

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_configs",
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("token_enc", sa.Text(), nullable=True),
        sa.Column("auth_scheme", sa.String(length=64), nullable=True),
        sa.Column("auth_credentials_enc", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant", "task_id", "id", name=op.f("pk_push_configs")),
    )
    op.create_index(
        "ix_push_configs_scope", "push_configs", ["tenant", "identity", "task_id"], unique=False
    )

    op.create_table(
        "push_outbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("config_id", sa.String(length=128), nullable=False),
        sa.Column("message_key", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column(
            "payload",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("unauthorized_attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_outbox")),
    )
    op.create_index(
        "ix_push_outbox_due", "push_outbox", ["status", "next_attempt_at"], unique=False
    )
    op.create_index("ix_push_outbox_task", "push_outbox", ["tenant", "task_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_table("push_outbox")
    op.drop_table("push_configs")
