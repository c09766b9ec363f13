from embedder.server import main

main()
