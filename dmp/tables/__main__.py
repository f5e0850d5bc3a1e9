from dmp.tables.cli import main

main()
