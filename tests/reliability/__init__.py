"""The reliability suite: load, faults, hostile input, tenant isolation and security basics."""
