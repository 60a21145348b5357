"""Helpers that several test folders share (system packages the tests need, ...)."""
