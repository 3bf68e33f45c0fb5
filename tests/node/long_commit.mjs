// A long commit through an MCP client that others wrote, with its default request timeout (the
// TypeScript SDK 1.x: 60 s, `resetTimeoutOnProgress` off) or a short one (`--timeout 5000`, the
// openai-agents default): it must get an answer well inside that timeout and then follow the
// commit with get_operation_status until it has landed. Run by tests/mcp/test_long_commits.py.
//
//   node long_commit.mjs --sdk v1|v2 --records 3000 [--timeout 5000] [--key KEY]
//   MCP_URL, MCP_TOKEN (optional bearer token)
//
// Prints one JSON object (what happened) on stdout; exit code 0 when the flow ran to its end.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, value, i, all) => (i % 2 ? pairs : [...pairs, [value.slice(2), all[i + 1]]]), []),
);
const sdk = args.sdk ?? "v1";
const count = Number(args.records ?? 3000);
const timeout = args.timeout ? Number(args.timeout) : undefined; // undefined: the SDK's default
const key = args.key ?? `long-${sdk}-${timeout ?? "default"}`; // one key per import

async function connect() {
  const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
  if (sdk === "v2") {
    const mod = await import("@modelcontextprotocol/client");
    const client = new mod.Client(
      { name: "long-commit-v2", version: "2.0.0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: { confirm: true } }));
    await client.connect(new mod.StreamableHTTPClientTransport(new URL(process.env.MCP_URL), { requestInit: { headers } }));
    return { client, call: (name, a) => client.callTool({ name, arguments: a }, timeout ? { timeout } : undefined) };
  }
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const types = await import("@modelcontextprotocol/sdk/types.js");
  const client = new Client({ name: "long-commit-v1", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(types.ElicitRequestSchema, async () => ({ action: "accept", content: { confirm: true } }));
  await client.connect(new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), { requestInit: { headers } }));
  return {
    client,
    call: (name, a) => client.callTool({ name, arguments: a }, undefined, timeout ? { timeout } : undefined),
  };
}

function structured(result) {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

async function main() {
  const { client, call } = await connect();
  const out = { sdk, timeout: timeout ?? null, polls: 0, slowestPollMs: 0 };
  const begun = structured(await call("begin_import", { target: "customers" }));
  for (let start = 0; start < count; start += 1000) {
    const records = Array.from({ length: Math.min(1000, count - start) }, (_, i) => ({ id: start + i }));
    await call("add_records", { handle: begun.handle, records });
  }
  const asked = Date.now();
  const first = structured(await call("commit_import", { handle: begun.handle, idempotency_key: key }));
  out.answerMs = Date.now() - asked;
  out.first = { status: first.status, operation_id: first.operation_id, message: first.message, records_sent: first.records_sent };
  let status = first.status;
  const progress = [];
  while (status === "in_progress") {
    const began = Date.now();
    const op = structured(await call("get_operation_status", { operation_id: first.operation_id, wait_seconds: 4 }));
    out.slowestPollMs = Math.max(out.slowestPollMs, Date.now() - began);
    out.polls += 1;
    status = op.status;
    if (op.records_sent != null) progress.push(op.records_sent);
    out.result = op.result;
  }
  out.progress = progress;
  out.final = status;
  out.totalMs = Date.now() - asked;
  // A repeat with the same key while it ran, or after, never makes a second batch.
  out.repeat = structured(await call("commit_import", { handle: begun.handle, idempotency_key: key })).status;
  await client.close();
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stdout.write(JSON.stringify({ fatal: String(error?.stack ?? error) }) + "\n");
    process.exit(1);
  },
);
