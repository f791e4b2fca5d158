"""turn attachments: the bytes and a document's text of an accepted turn's attachments
(issue 55); the task history keeps only their descriptions

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turn_attachments",
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.BigInteger(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("media_type", sa.String(length=64), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("pages", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint(
            "tenant", "task_id", "turn_id", "ordinal", name=op.f("pk_turn_attachments")
        ),
    )


def downgrade() -> None:
    op.drop_table("turn_attachments")
