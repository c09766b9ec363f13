from indexer.main import main

main()
