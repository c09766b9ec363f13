from semsearch.embedder.server import main

main()
