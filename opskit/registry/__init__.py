"""Topic registries as data (HIP-30)."""
