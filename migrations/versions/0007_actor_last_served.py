"""actors.last_served_at: when an identity's worker slot last went back to the queue

Revision ID: 0007
Revises: 0006

Why (issue 47, row 3): the claim gives a free worker slot to the identity that has waited
longest since it was last served (NULL, never served, first), after the tenants holding the
fewest leases; a worker gives the slot back after each turn (``app.worker.service``). No new
index: the claim finds waiting identities through ``ix_turns_unfinished`` and live leases
through ``ix_actors_lease_until``, and reads this column by primary key.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("actors", sa.Column("last_served_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("actors") as batch:
        batch.drop_column("last_served_at")
