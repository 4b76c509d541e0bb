from rlver.cli import main

main()
