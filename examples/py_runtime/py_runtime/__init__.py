"""A small Python agent runtime following Bub's background `subagent` rules (docs/rules/bub.md)."""
