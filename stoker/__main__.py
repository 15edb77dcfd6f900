from stoker.cli import main

main()
