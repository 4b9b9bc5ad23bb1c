"""Small training programs written the way users write them (not through our workloads)."""
