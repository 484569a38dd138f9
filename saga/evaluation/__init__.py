"""Extraction quality on a corpus: ground truth, matching, scores and gates (``saga eval``)."""
