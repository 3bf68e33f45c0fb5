// The browser test's host (tests/mcp/test_apps_view.py): an MCP client of the server, with the
// official host-side bridge of MCP Apps rendering the tool's view in a sandboxed iframe.
//
//   index.html?token=T&tool=get_import_status&args={"handle":"imp_..."}
//
// It connects the TypeScript MCP client (2026-07-28) declaring form elicitation and the Apps
// extension, lists the tools, reads the tool's ui:// view, renders it in an iframe with
// sandbox="allow-scripts" (an opaque origin: no cookie, no storage, not this page's origin), lets
// AppBridge forward the view's tools/call and resources/read to the server, then calls the tool and
// hands the view its input and result. The server's questions (form elicitation) are shown as a
// dialog for the person (the test) to accept or decline. What happened is in window.host for the test.

import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const query = new URLSearchParams(location.search);
const token = query.get("token");
const toolName = query.get("tool") ?? "get_import_status";
const args = JSON.parse(query.get("args") ?? "{}");

const host = (window.host = { asked: [], answers: [], requests: [], results: [], errors: [], view: null, ready: false });

function status(text) {
  document.getElementById("status").textContent = text;
}

// A person answering the server's question: the dialog waits for a click.
function ask(message) {
  host.asked.push(message);
  const dialog = document.getElementById("ask");
  document.getElementById("ask-message").textContent = message;
  dialog.show();
  return new Promise((resolve) => {
    const answer = (action) => () => {
      dialog.close();
      host.answers.push(action);
      resolve(action === "accept" ? { action, content: { confirm: true } } : { action });
    };
    document.getElementById("ask-accept").onclick = answer("accept");
    document.getElementById("ask-decline").onclick = answer("decline");
  });
}

async function main() {
  const client = new Client(
    { name: "adapter-apps-test-host", version: "1.0.0" },
    {
      capabilities: { elicitation: { form: {} }, extensions: { [UI]: { mimeTypes: [MIME] } } },
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    },
  );
  client.setRequestHandler("elicitation/create", async (request) => ask(request.params.message));
  // Every request the host sends the server, its own and the view's (forwarded by AppBridge).
  const request = client.request.bind(client);
  client.request = (message, ...rest) => {
    host.requests.push({ method: message.method, name: message.params?.name, uri: message.params?.uri });
    return request(message, ...rest);
  };
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.origin), { requestInit: { headers } }));

  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === toolName);
  document.getElementById("called").textContent = `${toolName} ${JSON.stringify(args)}`;
  const uri = tool && getToolUiResourceUri(tool);
  if (!uri) {
    host.view = "none";
    status("this tool names no view");
    host.results.push(await client.callTool({ name: toolName, arguments: args }));
    host.ready = true;
    return;
  }
  const { contents } = await client.readResource({ uri });
  const [view] = contents;
  if (view.mimeType !== MIME) throw new Error(`the view is ${view.mimeType}`);
  host.view = uri;

  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.title = "import review";
  document.getElementById("frame").append(iframe);
  const bridge = new AppBridge(
    client,
    { name: "adapter-apps-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: "light", displayMode: "inline", platform: "web", toolInfo: { tool } } },
  );
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${Math.ceil(height) + 4}px`;
  };
  bridge.oninitialized = async () => {
    host.ready = true;
    status("view ready");
    await bridge.sendToolInput({ arguments: args });
    try {
      const result = await client.callTool({ name: toolName, arguments: args });
      host.results.push(result);
      await bridge.sendToolResult(result);
      status("tool answered");
    } catch (error) {
      host.errors.push(String(error?.message ?? error));
      await bridge.sendToolCancelled({ reason: String(error?.message ?? error) });
    }
  };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = view.text;
  status("view loading");
}

main().catch((error) => {
  host.errors.push(String(error?.message ?? error));
  status(`failed: ${error?.message ?? error}`);
});
