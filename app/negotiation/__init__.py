"""Negotiation sessions between agents over A2A 1.0 (issue 51, ``docs/negotiation.md``).

``decision`` is the wire (one data part per move), ``vocabulary`` the actions and their
terminal flags, ``settlement`` what both sides compute from the task alone; the store, the
negotiator, the outbound pump and the inbound answerer build on them.
"""
