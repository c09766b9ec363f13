from mcp_bridge.main import main

main()
