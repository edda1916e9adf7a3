"""A smolagents 1.26.0 multi-agent system, written as smolagents' docs teach, for rehearsal to drive."""
