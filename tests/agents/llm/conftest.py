from tests.agents.llm.kit import fake

__all__ = ["fake"]
