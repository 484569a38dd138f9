"""The document pipeline's definition (router -> parser -> grouper, the
steps in ``saga.steps``), its publishing, review decisions and the demo."""
