from recompile_fix.cli import main

main()
