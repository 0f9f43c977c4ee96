"""Brook's settings: one model (`settings.py`) and loaders that translate into it."""

from brook.config.settings import AuthSettings, ConfigError, JetStreamSettings, Settings, User

__all__ = ["AuthSettings", "ConfigError", "JetStreamSettings", "Settings", "User"]
