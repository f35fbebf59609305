"""The prediction beside a real run of the same workload."""
