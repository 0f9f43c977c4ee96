"""Leafnode connections: Brook as a spoke dialling a hub and as a hub accepting spokes
(ADR 0032). A layer between `server`, which composes it, and `jetstream`."""
