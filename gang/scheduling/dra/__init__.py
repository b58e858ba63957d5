"""Dynamic Resource Allocation on the scheduling side: device selectors (CEL) and the structured allocator."""
