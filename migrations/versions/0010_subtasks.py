"""subtasks: the delegation rounds of llm agents, one row per subtask

Revision ID: 0010
Revises: 0009

A row per subtask a round of a task delegated, in the task's caller scope; ordinals count
across the task's rounds (unique per task), and the round index serves a round's reads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "subtasks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=63), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("params", json_type, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("steps", json_type, nullable=False),
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
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subtasks")),
        sa.UniqueConstraint(
            "tenant",
            "identity",
            "task_id",
            "ordinal",
            name=op.f("uq_subtasks_tenant_identity_task_id_ordinal"),
        ),
    )
    op.create_index("ix_subtasks_round", "subtasks", ["tenant", "identity", "task_id", "round"])


def downgrade() -> None:
    op.drop_index("ix_subtasks_round", table_name="subtasks")
    op.drop_table("subtasks")
