// Builds, with esbuild from the pinned package-lock:
//
//   node build.mjs view [OUT]  the review view's script (view/review.js with the official App class
//                              of @modelcontextprotocol/ext-apps) into the Python package, where the
//                              server inlines it into the view's HTML (make apps-view; OUT: elsewhere,
//                              for the test that checks the shipped file is this build)
//   node build.mjs host        the browser test's host page script (host/host.js with the official
//                              AppBridge and the TypeScript MCP client) and its page into
//                              node_modules/.build/host/
//                              (make apps-host; tests/mcp/test_apps_view.py serves it)

import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const [what, out] = process.argv.slice(2);

function bundled(names) {
  return names
    .map((name) => {
      const meta = JSON.parse(readFileSync(join(here, "node_modules", name, "package.json"), "utf8"));
      return `${meta.name} ${meta.version} (${meta.license})`;
    })
    .join(", ");
}

const common = {
  bundle: true,
  format: "iife",
  platform: "browser",
  target: "es2022",
  charset: "utf8",
  legalComments: "none",
  logLevel: "warning",
};

if (what === "view") {
  const banner =
    "// The import review view (apps/view/review.js), built by `make apps-view`. Bundled: " +
    bundled(["@modelcontextprotocol/ext-apps", "@modelcontextprotocol/client", "@modelcontextprotocol/core", "zod"]) +
    "; their licence texts are in those npm packages.";
  await build({
    ...common,
    entryPoints: [join(here, "view", "review.js")],
    outfile: out ?? join(here, "..", "adapter", "entrypoints", "mcp", "views", "review.js"),
    minify: true,
    banner: { js: banner },
  });
} else if (what === "host") {
  const folder = join(here, "node_modules", ".build", "host");
  mkdirSync(folder, { recursive: true });
  copyFileSync(join(here, "host", "index.html"), join(folder, "index.html"));
  await build({ ...common, entryPoints: [join(here, "host", "host.js")], outfile: join(folder, "host.js") });
} else {
  console.error("usage: node build.mjs view [OUT] | host");
  process.exit(2);
}
