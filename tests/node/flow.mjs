// The whole import flow driven by an MCP client that others wrote: the TypeScript SDK 1.x
// (`@modelcontextprotocol/sdk`, 2025 initialize handshake) or the v2 client
// (`@modelcontextprotocol/client`, pinned to 2026-07-28). Run by tests/*/test_*node*.py.
//
//   node flow.mjs --sdk v1|v2 --transport http|stdio
//   http:  MCP_URL, MCP_TOKEN (optional bearer token)
//   stdio: MCP_COMMAND, MCP_ARGS (JSON array); the server's ADAPTER_* settings come from the env
//
// Prints one JSON object (what happened) on stdout; the Python test asserts on it and on the
// legacy system. Exit code 0 when the flow ran to its end, 1 on an unexpected exception.

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, value, i, all) => (i % 2 ? pairs : [...pairs, [value.slice(2), all[i + 1]]]), []),
);
const sdk = args.sdk ?? "v1";
const transportKind = args.transport ?? "http";

async function loadV1() {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const types = await import("@modelcontextprotocol/sdk/types.js");
  const client = new Client({ name: "flow-v1", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  return {
    client,
    Http: StreamableHTTPClientTransport,
    Stdio: StdioClientTransport,
    onElicit: (fn) => client.setRequestHandler(types.ElicitRequestSchema, fn),
    onNotification: (method, fn) => {
      const schema = {
        "notifications/resources/updated": types.ResourceUpdatedNotificationSchema,
        "notifications/resources/list_changed": types.ResourceListChangedNotificationSchema,
      }[method];
      client.setNotificationHandler(schema, fn);
    },
    subscribe: (uri) => client.subscribeResource({ uri }),
  };
}

async function loadV2() {
  const mod = await import("@modelcontextprotocol/client");
  const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
  const client = new mod.Client(
    { name: "flow-v2", version: "2.0.0" },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  return {
    client,
    Http: mod.StreamableHTTPClientTransport,
    Stdio: StdioClientTransport,
    onElicit: (fn) => client.setRequestHandler("elicitation/create", fn),
    onNotification: (method, fn) => client.setNotificationHandler(method, fn),
    subscribe: (uri) => client.listen({ resourceSubscriptions: [uri] }),
  };
}

function structured(result) {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

async function main() {
  const kit = sdk === "v2" ? await loadV2() : await loadV1();
  const { client } = kit;
  const out = { sdk, transport: transportKind, asked: [], progress: [], updates: [], listChanged: 0 };
  let answer = "decline";
  kit.onElicit(async (request) => {
    out.asked.push(request.params.message);
    return answer === "accept" ? { action: "accept", content: { confirm: true } } : { action: "decline" };
  });
  kit.onNotification("notifications/resources/updated", async (n) => out.updates.push(n.params.uri));
  kit.onNotification("notifications/resources/list_changed", async () => (out.listChanged += 1));

  let transport;
  if (transportKind === "http") {
    const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
    transport = new kit.Http(new URL(process.env.MCP_URL), { requestInit: { headers } });
  } else {
    transport = new kit.Stdio({
      command: process.env.MCP_COMMAND,
      args: JSON.parse(process.env.MCP_ARGS ?? "[]"),
      env: process.env,
      stderr: "ignore",
    });
  }
  // 1.x tells the transport the negotiated version (HTTP keeps it for its header); listen in
  const setVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (version) => {
    out.protocolVersion = version;
    setVersion?.(version);
  };
  await client.connect(transport);
  out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? out.protocolVersion ?? null;

  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name);

  // v1: callTool(params, resultSchema, options); v2: callTool(params, options)
  const call = (name, args, options) =>
    sdk === "v2"
      ? client.callTool({ name, arguments: args }, options)
      : client.callTool({ name, arguments: args }, undefined, options);
  const records = Array.from({ length: 30 }, (_, i) => ({ id: i, name: `customer ${i}` }));
  const begun = structured(await call("begin_import", { target: "customers" }));
  const uri = `import://${begun.handle}`;
  out.uri = uri;
  const added = structured(await call("add_records", { handle: begun.handle, records }));
  out.added = added.record_count;
  const subscription = await kit.subscribe(uri);

  out.declined = structured(await call("commit_import", { handle: begun.handle })).status;
  answer = "accept";
  const committed = structured(
    await call("commit_import", { handle: begun.handle, idempotency_key: "flow-commit" }, {
      onprogress: (p) => p.total && out.progress.push(p.progress),
    }),
  );
  out.committed = { status: committed.status, record_count: committed.record_count, batch: committed.legacy_batch_id };
  for (let i = 0; i < 100 && !out.updates.includes(uri); i++) await new Promise((r) => setTimeout(r, 100));

  // resources/list, page by page (the test sets a page size of 3), and one read
  for (const target of ["a", "b", "c"]) await call("begin_import", { target });
  // v1 lists one page per call; v2 without a cursor walks every page itself (listMaxPages)
  let cursor;
  out.pages = 0;
  out.listed = 0;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    out.pages += 1;
    out.listed += page.resources.length;
    cursor = page.nextCursor;
  } while (cursor && out.pages < 20);
  const read = await client.readResource({ uri });
  out.read = JSON.parse(read.contents[0].text).status;

  // an error the model sees
  const missing = await call("get_import_status", { handle: "imp_" + "x".repeat(40) });
  out.error = { isError: missing.isError === true, text: missing.content[0].text };

  // cancellation: abort a long commit after its first progress notification
  const slow = structured(await call("begin_import", { target: "slow" }));
  for (let start = 0; start < 3000; start += 1000) {
    const chunk = Array.from({ length: 1000 }, (_, i) => ({ id: start + i }));
    await call("add_records", { handle: slow.handle, records: chunk });
  }
  const abort = new AbortController();
  answer = "accept";
  const asked = out.asked.length;
  try {
    await call("commit_import", { handle: slow.handle, idempotency_key: "flow-cancel" }, {
      signal: abort.signal,
      // the server's progress names a total; the v2 client's own "input round" progress does not
      onprogress: (p) => p.total && abort.abort(),
    });
    out.cancel = "not cancelled";
  } catch (error) {
    out.cancel = "aborted";
  }
  out.askedForCancelled = out.asked.length - asked;
  for (let i = 0; i < 200; i++) {
    const op = await call("get_operation_status", { idempotency_key: "flow-cancel" });
    out.cancelStatus = op.isError ? op.content[0].text : op.structuredContent.status;
    if (["cancelled", "succeeded", "failed", "outcome_unknown"].includes(out.cancelStatus)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (subscription?.close) await subscription.close();
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
