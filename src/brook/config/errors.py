"""The error of every loader and check of the settings model: a setting missing,
unknown or out of range, the message naming its key."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is missing, unknown or out of range; the message names the key."""
