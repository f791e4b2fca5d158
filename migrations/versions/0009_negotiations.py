"""negotiations: sessions between agents, both directions, and their turns (issue 51)

Revision ID: 0009
Revises: 0008

The rival rule is a unique partial index over (tenant, identity, counterparty, intent) on the
binding rows (open, or closed as a deal), so two claims racing for one key cannot both win.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
_NOW = sa.text("CURRENT_TIMESTAMP")


def upgrade() -> None:
    op.create_table(
        "negotiations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("direction", sa.String(length=8), nullable=False),
        sa.Column("counterparty", sa.Text(), nullable=False),
        sa.Column("intent", sa.Text(), nullable=False),
        sa.Column("origin_key", sa.Text(), nullable=False),
        sa.Column("task_id", sa.Text(), nullable=True),
        sa.Column("context_id", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("task_state", sa.String(length=40), nullable=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("last_offer", _JSON, nullable=True),
        sa.Column("binding", sa.Boolean(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("basis", sa.String(length=16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("terms", _JSON, nullable=True),
        sa.Column("pending", sa.Text(), nullable=True),
        sa.Column("guidance", _JSON, nullable=False),
        sa.Column("objective", sa.Text(), nullable=True),
        sa.Column("detail", _JSON, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_negotiations")),
        sa.UniqueConstraint("tenant", "origin_key", name=op.f("uq_negotiations_tenant_origin_key")),
    )
    op.create_index(
        "uq_negotiations_binding",
        "negotiations",
        ["tenant", "identity", "counterparty", "intent"],
        unique=True,
        postgresql_where=sa.text("binding"),
        sqlite_where=sa.text("binding"),
    )
    op.create_index("ix_negotiations_task", "negotiations", ["tenant", "task_id"])
    op.create_index("ix_negotiations_updated", "negotiations", ["tenant", "updated_at"])
    op.create_table(
        "negotiation_turns",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("negotiation_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("way", sa.String(length=8), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("reply_to", sa.Text(), nullable=True),
        sa.Column("message", _JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_negotiation_turns")),
        sa.UniqueConstraint(
            "negotiation_id", "seq", name=op.f("uq_negotiation_turns_negotiation_id_seq")
        ),
        sa.UniqueConstraint(
            "negotiation_id",
            "message_id",
            name=op.f("uq_negotiation_turns_negotiation_id_message_id"),
        ),
    )


def downgrade() -> None:
    op.drop_table("negotiation_turns")
    op.drop_index("ix_negotiations_updated", table_name="negotiations")
    op.drop_index("ix_negotiations_task", table_name="negotiations")
    op.drop_index("uq_negotiations_binding", table_name="negotiations")
    op.drop_table("negotiations")
