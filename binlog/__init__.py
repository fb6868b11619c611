"""The raw-event contract (floor 3): what the extractor writes and what reads it."""
