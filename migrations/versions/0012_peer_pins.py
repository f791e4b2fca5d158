"""peer pins: the signing identity each counterparty edge's card was first verified with
(issue 51), shared by every process of this edge and kept across restarts

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "peer_pins",
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("jku", sa.Text(), nullable=False),
        sa.Column("kid", sa.Text(), nullable=False),
        sa.Column(
            "pinned_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("origin", name=op.f("pk_peer_pins")),
    )


def downgrade() -> None:
    op.drop_table("peer_pins")
