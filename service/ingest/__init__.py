"""Ingest: billing deliveries and inventory snapshots into the lake, the per-source state, status."""
