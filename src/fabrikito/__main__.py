from fabrikito.cli import run

run()
