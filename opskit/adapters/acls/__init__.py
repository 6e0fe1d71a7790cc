"""ACL I/O: the principal's ACL check before a mutation, ACL reads and changes with their backups."""
