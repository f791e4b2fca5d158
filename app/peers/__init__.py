"""Agents that call other A2A agents (issue 54): the directory of an ``llm`` agent's peers,
their verified cards, authentication, the a2a-sdk client with bounded transport, the
``a2a_*`` tools, and sends recorded durably so a re-run never sends twice."""
