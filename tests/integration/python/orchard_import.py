"""Imported by call_tree.py: its top-level code runs (under the import machinery's frames)."""
import time


def ripen_on_import(seconds):  # for seconds of this thread's CPU time, as call_tree.py's parts
    end = time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) + seconds
    x = 1
    while time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID) < end:
        for _ in range(64):
            x = x * 3 % 1000003
    return x


ripen_on_import(float(__import__("os").environ.get("ORCHARD_IMPORT_SECONDS", "0.3")))
