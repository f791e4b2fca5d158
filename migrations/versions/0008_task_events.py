"""task events: the per-task log streams are read from (A2A 1.0 SendStreamingMessage,
SubscribeToTask)

Revision ID: 0008
Revises: 0007

Triggers on ``tasks`` append a row for every change of a task's status or artifacts, in the
transaction of the change (so every writer, on either backend, is covered without knowing of
streams), and delete a task's rows with the task. On PostgreSQL the trigger also sends, for a
change of an existing task, ``NOTIFY looping_task_events`` (the channel
``app.db.signals.TASK_EVENTS_CHANNEL`` names) with the task's ``[tenant, id]`` as payload,
delivered at commit.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_PG_STATEMENTS = (
    """
CREATE FUNCTION looping_task_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO task_events (tenant, task_id, status, artifacts)
    VALUES (NEW.tenant, NEW.id, NEW.status,
            CASE WHEN NEW.artifacts = '[]'::jsonb THEN NULL ELSE NEW.artifacts END);
    -- Nobody can be following a task before it exists: no NOTIFY (each one serialises
    -- commits on the notification queue, so the new-task accept skips it).
    RETURN NULL;
  ELSIF NEW.status IS DISTINCT FROM OLD.status
        OR NEW.artifacts IS DISTINCT FROM OLD.artifacts THEN
    INSERT INTO task_events (tenant, task_id, status, artifacts)
    VALUES (NEW.tenant, NEW.id, NEW.status,
            CASE WHEN NEW.artifacts IS DISTINCT FROM OLD.artifacts THEN NEW.artifacts END);
  ELSE
    RETURN NULL;
  END IF;
  PERFORM pg_notify('looping_task_events', json_build_array(NEW.tenant, NEW.id)::text);
  RETURN NULL;
END $$
""",
    """
CREATE FUNCTION looping_task_events_purge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM task_events WHERE tenant = OLD.tenant AND task_id = OLD.id;
  RETURN NULL;
END $$
""",
    """
CREATE TRIGGER tasks_events AFTER INSERT OR UPDATE ON tasks
  FOR EACH ROW EXECUTE FUNCTION looping_task_event()
""",
    """
CREATE TRIGGER tasks_events_purge AFTER DELETE ON tasks
  FOR EACH ROW EXECUTE FUNCTION looping_task_events_purge()
""",
)

_SQLITE_TRIGGERS = (
    """
CREATE TRIGGER tasks_events_insert AFTER INSERT ON tasks BEGIN
  INSERT INTO task_events (tenant, task_id, status, artifacts)
  VALUES (NEW.tenant, NEW.id, NEW.status,
          CASE WHEN NEW.artifacts = '[]' THEN NULL ELSE NEW.artifacts END);
END
""",
    """
CREATE TRIGGER tasks_events_update AFTER UPDATE ON tasks
WHEN NEW.status IS NOT OLD.status OR NEW.artifacts IS NOT OLD.artifacts BEGIN
  INSERT INTO task_events (tenant, task_id, status, artifacts)
  VALUES (NEW.tenant, NEW.id, NEW.status,
          CASE WHEN NEW.artifacts IS NOT OLD.artifacts THEN NEW.artifacts END);
END
""",
    """
CREATE TRIGGER tasks_events_purge AFTER DELETE ON tasks BEGIN
  DELETE FROM task_events WHERE tenant = OLD.tenant AND task_id = OLD.id;
END
""",
)


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "task_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("tenant", sa.String(length=63), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("status", json_type, nullable=False),
        sa.Column("artifacts", json_type, nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("CURRENT_TIMESTAMP"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_events")),
    )
    op.create_index("ix_task_events_task", "task_events", ["tenant", "task_id", "id"])
    postgres = op.get_context().dialect.name == "postgresql"
    for statement in _PG_STATEMENTS if postgres else _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_context().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS tasks_events ON tasks")
        op.execute("DROP TRIGGER IF EXISTS tasks_events_purge ON tasks")
        op.execute("DROP FUNCTION IF EXISTS looping_task_event()")
        op.execute("DROP FUNCTION IF EXISTS looping_task_events_purge()")
    else:
        for name in ("tasks_events_insert", "tasks_events_update", "tasks_events_purge"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_index("ix_task_events_task", table_name="task_events")
    op.drop_table("task_events")
