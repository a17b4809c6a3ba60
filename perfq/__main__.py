from perfq.cli import main

main()
