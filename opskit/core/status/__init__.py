"""Burrow-style consumer-group status: ranks (``rank``), sample windows (``window``),
results (``result``) and the rules that judge a window (``evaluate``)."""
