"""advisor: reads JAX/Flax profiler traces and says what is slow or heavy, and which change fixes it."""

__version__ = "0.1.0"
