from mcp_bridge.server import main

main()
