"""The graph IR: scalar expressions of elementwise ops."""
