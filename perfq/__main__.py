from perfq.cli import run

run()
