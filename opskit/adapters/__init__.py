"""I/O adapters: Kafka, files, processes. Vendor errors become opskit errors here."""
