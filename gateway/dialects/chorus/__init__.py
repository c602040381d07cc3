"""Chorus 0.1 (`spec/chorus.md` of Timbal): an agent taking part in a team chat channel."""
