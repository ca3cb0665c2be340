from hpcvar.cli import main

main()
