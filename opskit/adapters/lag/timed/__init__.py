"""Lag with time: a lag report with the age of the oldest unconsumed record of each
partition and the retention headroom (:mod:`.report`), and its collection from
Kafka (:mod:`.collect`)."""
