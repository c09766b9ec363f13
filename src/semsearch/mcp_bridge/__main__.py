from semsearch.mcp_bridge.main import main

main()
