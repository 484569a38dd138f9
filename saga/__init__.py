"""saga: a durable saga runner for medical document pipelines on Redis."""

__version__ = "0.1.0"
__all__ = ["__version__"]
