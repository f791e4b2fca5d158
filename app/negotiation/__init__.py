"""Negotiation sessions between agents over A2A 1.0 (issue 51, ``docs/negotiation.md``).

``decision`` is the wire (one data part per move), ``vocabulary`` the actions and their
terminal flags, ``settlement`` what both sides compute from the task alone, ``negotiator``
the model (or Python) call deciding a move; ``peers`` dials a counterparty's edge, ``gate``
checks a peer's move at accept, ``inbound`` answers it in the worker, ``outbound`` runs the
exchanges the ``negotiate``/``answer`` tools open (``service``), ``digest`` and ``record`` say
what happened, ``card`` adds the ``negotiate`` skill, ``irreversible`` gates acting tools.
"""
