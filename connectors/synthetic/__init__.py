"""The demo organisation's writers: they write the files the connectors read (they are not connectors)."""
