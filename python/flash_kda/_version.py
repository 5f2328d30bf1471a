"""Version of the flash-kda distribution (keep in sync with pyproject.toml and the C API)."""

__version__ = "0.1.0"
