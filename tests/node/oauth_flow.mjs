// The TypeScript SDK's own OAuth client against the server and a real provider: the SDK 1.x
// (`@modelcontextprotocol/sdk`, 2025 initialize handshake) or the v2 client
// (`@modelcontextprotocol/client`, pinned to 2026-07-28), each with its ClientCredentialsProvider.
// It starts without a token: the 401 names the metadata, the SDK finds the provider there, gets a
// token for this server and runs an import to its commit. (The TypeScript client-credentials
// provider asks for the scopes it is configured with, SCOPE, whatever a challenge names.) Run by
// tests/oauth/test_node_clients.py.
//
//   node oauth_flow.mjs --sdk v1|v2      env: MCP_URL, ISSUER, CLIENT_ID, CLIENT_SECRET, SCOPE
//
// Prints one JSON object on stdout: the HTTP statuses it saw per path, the results, the scopes.

const sdk = process.argv[process.argv.indexOf("--sdk") + 1] ?? "v1";

async function load() {
  if (sdk === "v2") {
    const mod = await import("@modelcontextprotocol/client");
    const client = new mod.Client(
      { name: "oauth-v2", version: "2.0.0" },
      { capabilities: {}, versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    return { client, Http: mod.StreamableHTTPClientTransport, Provider: mod.ClientCredentialsProvider };
  }
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { ClientCredentialsProvider } = await import("@modelcontextprotocol/sdk/client/auth-extensions.js");
  const client = new Client({ name: "oauth-v1", version: "1.0.0" }, { capabilities: {} });
  return { client, Http: StreamableHTTPClientTransport, Provider: ClientCredentialsProvider };
}

const out = { sdk, seen: [] };

async function main() {
  const { client, Http, Provider } = await load();
  const provider = new Provider({
    clientId: process.env.CLIENT_ID,
    clientSecret: process.env.CLIENT_SECRET,
    expectedIssuer: process.env.ISSUER,
    scope: process.env.SCOPE,
  });
  const recording = async (url, init) => {
    const response = await fetch(url, init);
    out.seen.push([new URL(url).pathname, response.status]);
    return response;
  };
  const transport = new Http(new URL(process.env.MCP_URL), { authProvider: provider, fetch: recording });
  await client.connect(transport);
  out.tools = (await client.listTools()).tools.map((t) => t.name);

  const call = async (name, args) => {
    const result = await client.callTool({ name, arguments: args });
    if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
    return result.structuredContent;
  };
  const begun = await call("begin_import", { target: "customers" });
  await call("add_records", { handle: begun.handle, records: [{ id: 1 }, { id: 2 }, { id: 3 }] });
  out.committed = (await call("commit_import", { handle: begun.handle })).status;
  out.status = (await call("get_import_status", { handle: begun.handle })).status;
  out.scope = provider.tokens()?.scope ?? null;
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ ...out, fatal: String(error?.stack ?? error) }) + "\n");
  process.exit(1);
});
