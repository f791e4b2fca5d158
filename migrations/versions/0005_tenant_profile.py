"""tenant profile: gateway (the Looping gateway's contract) or open (general A2A clients)

Revision ID: 0005
Revises: 0004

Issue 49: an ``open`` tenant serves general A2A clients (pushes to any https URL that passes
the SSRF rules, Message results). Existing rows are ``gateway`` tenants, today's behaviour.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("profile", sa.String(length=16), nullable=False, server_default="gateway")
        )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("profile")
