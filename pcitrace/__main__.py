from pcitrace.cli import run

run()
