"""Inline attachments in a user turn (issue 55): the per-tenant opt-in and the checks that
run before a message is accepted."""
