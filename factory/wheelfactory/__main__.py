from wheelfactory.cli.main import main

main()
