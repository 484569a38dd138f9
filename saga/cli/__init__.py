"""The ``saga`` command line."""
