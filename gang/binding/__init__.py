"""The binding cycle: binding permitted gangs, and telling users what happened."""
