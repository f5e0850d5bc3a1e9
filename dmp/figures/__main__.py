from dmp.figures.cli import main

main()
