"""Stubs of daqiri/v1/control.proto, generated when the package is built (setup.py)."""
