// A client of `semsearch mcp` written with the official TypeScript MCP SDK (the client family
// most agents are built on). Reads a JSON plan on stdin, prints what the server answered as JSON.
//   {"transport": "stdio", "command": "...", "args": [...], "env": {...}, "calls": [{"name", "arguments"}]}
//   {"transport": "http", "url": "http://127.0.0.1:8767/mcp", "headers": {...}, "calls": [...]}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const plan = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const transport =
  plan.transport === "http"
    ? new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers: plan.headers ?? {} } })
    : new StdioClientTransport({ command: plan.command, args: plan.args ?? [], env: plan.env, cwd: plan.cwd, stderr: "pipe" });

const client = new Client({ name: "semsearch-ts-test", version: "1.0.0" });
const out = { serverInfo: null, tools: [], results: [] };
try {
  await client.connect(transport);
  out.serverInfo = client.getServerVersion() ?? null;
  out.tools = (await client.listTools()).tools;
  for (const call of plan.calls ?? []) {
    try {
      // callTool validates structuredContent against the tool's outputSchema when there is one.
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      out.results.push({
        name: call.name,
        isError: result.isError === true,
        text: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
        structuredContent: result.structuredContent ?? null,
      });
    } catch (error) {
      out.results.push({ name: call.name, thrown: String(error?.message ?? error) });
    }
  }
} finally {
  await client.close();
}
process.stdout.write(JSON.stringify(out));
