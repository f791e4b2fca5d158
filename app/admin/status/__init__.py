"""The status page on the admin listener (issue 53): the edge's state at a glance, as HTML."""
