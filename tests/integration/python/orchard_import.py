"""Imported by call_tree.py: its top-level code runs (under the import machinery's frames)."""
import time


def ripen_on_import(seconds):
    end = time.monotonic() + seconds
    x = 1
    while time.monotonic() < end:
        x = x * 3 % 1000003
    return x


ripen_on_import(float(__import__("os").environ.get("ORCHARD_IMPORT_SECONDS", "0.3")))
