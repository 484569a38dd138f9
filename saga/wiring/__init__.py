"""The wiring: settings -> Redis clients and ports -> worker processes, and
the logging set-up they share."""
