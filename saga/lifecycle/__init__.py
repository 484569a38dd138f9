"""The data's life past the state machine: the retention sweep's archive (``archiver``)."""
