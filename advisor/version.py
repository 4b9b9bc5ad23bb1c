"""advisor's version: what reports, caches and baselines record (a module of its own, so that a
module inside advisor reads it without importing the package's face, which imports the API)."""

__version__ = "0.1.0"
