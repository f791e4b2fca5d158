"""SQLAlchemy code both storage backends run where their SQL is the same."""
