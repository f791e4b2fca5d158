"""The second edge's PostgreSQL database of the two-edge tests (as the negotiation tests')."""

from tests.negotiation.conftest import second_pg_url, second_postgres_url

__all__ = ["second_pg_url", "second_postgres_url"]
