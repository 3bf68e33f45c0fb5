// The import review: an MCP Apps view (io.modelcontextprotocol/ui) of one import before it commits.
//
// Source of adapter/entrypoints/mcp/views/review.js (bundled with the official App class by
// `make apps-view`; tests/mcp/test_apps_view.py checks the shipped bundle is this file built from the
// pinned package-lock). The server inlines the bundle into the view's HTML under a hash-based CSP
// (adapter/entrypoints/mcp/apps.py): nothing is fetched, no font, no script from elsewhere.
//
// Everything the view shows comes through the host, from tools and resources the caller may use:
//   resources/read  import://{handle}/review?after=N&size=M   the review (a page, counts, the question)
//   tools/call      get_import_status, get_operation_status    a running commit's progress
//   tools/call      commit_import, abort_import                the buttons; the server asks the person
//                                                               (the host shows its question) before
//                                                               anything lands or is voided
// Record contents are shown as text (textContent), never as markup.

import { App, applyDocumentTheme, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";

const PAGE = 20;
const FOLLOWED = new Set(["committing", "outcome_unknown", "compensating"]);
const OUTCOME = {
  open: "Not committed yet.",
  committing: "The commit is in progress on the server.",
  committed: "Committed.",
  outcome_unknown: "Unknown: the legacy system has not confirmed whether the batch landed; it is being asked.",
  compensating: "The committed batch is being voided.",
  compensated: "Compensated: the committed batch was voided.",
  aborted: "Aborted: nothing was committed; the staged records were dropped.",
  expired: "Expired: nothing was committed.",
};

const config = JSON.parse(document.getElementById("view-config").textContent);
const tools = config.tools;
const $ = (id) => document.getElementById(id);

const state = { handle: null, after: 0, pages: [], review: null, busy: false, key: null, following: false };

const app = new App({ name: "import-review", version: config.version }, {}, { autoResize: true });

function applyContext(context) {
  if (!context) return;
  if (context.theme) applyDocumentTheme(context.theme);
  if (context.styles?.variables) applyHostStyleVariables(context.styles.variables);
  // Host fonts are not applied: the view loads nothing from outside (its CSP says font-src 'none').
}

app.onhostcontextchanged = applyContext;

app.ontoolinput = (params) => {
  const handle = params?.arguments?.handle;
  if (typeof handle === "string" && handle !== state.handle) {
    state.handle = handle;
    state.after = 0;
    state.pages = [];
    refresh();
  }
};

app.ontoolresult = (result) => {
  const data = result?.structuredContent;
  if (result?.isError) {
    notice(textOf(result), "error");
    return;
  }
  if (data && typeof data.handle === "string") {
    if (!state.handle) state.handle = data.handle;
    if (data.status === "in_progress" || data.status === "outcome_unknown") follow();
    refresh();
  }
};

function textOf(result) {
  return (result?.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join(" ");
}

function notice(text, kind = "info") {
  const box = $("notice");
  box.textContent = text;
  box.dataset.kind = kind;
  box.hidden = !text;
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

function shown(value) {
  if (value === undefined) return "";
  if (value === null) return "null";
  return typeof value === "string" ? value : JSON.stringify(value);
}

const number = new Intl.NumberFormat("en");

async function readReview() {
  const uri = `import://${state.handle}/review?after=${state.after}&size=${PAGE}`;
  const read = await app.readServerResource({ uri });
  const [content] = read.contents;
  return JSON.parse(content.text);
}

async function refresh() {
  if (!state.handle) return;
  try {
    state.review = await readReview();
  } catch (error) {
    state.review = null;
    render();
    notice(`This import cannot be shown: ${error?.message ?? error}`, "error");
    return;
  }
  render();
  if (FOLLOWED.has(state.review.status)) follow();
}

function render() {
  const review = state.review;
  $("review").hidden = !review;
  if (!review) return;
  showStatus(review.status);
  $("target").textContent = review.target;
  $("target-description").textContent = review.target_description ?? "";
  $("schema").textContent = JSON.stringify(review.target_schema ?? {}, null, 2);
  $("count").textContent = number.format(review.record_count);
  $("expires").textContent = review.status === "open" ? `· expires ${when(review.expires_at)}` : "";
  renderRecords(review);
  renderMissing(review);
  renderQuestion(review);
  if (review.legacy_batch_id && review.status !== "open") {
    $("outcome").textContent += ` Legacy batch ${review.legacy_batch_id}.`;
  }
  if (review.status === "committed" && review.commit) {
    progress(review.record_count, review.record_count, `All ${number.format(review.record_count)} records were sent.`);
  } else if (!FOLLOWED.has(review.status)) {
    $("progress-box").hidden = true;
  }
  buttons();
}

function showStatus(status) {
  document.body.dataset.status = status;
  $("status").textContent = status.replace("_", " ");
  $("outcome").textContent = OUTCOME[status] ?? status;
}

function when(iso) {
  const moment = new Date(iso);
  return Number.isNaN(moment.getTime()) ? iso : `${moment.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function renderRecords(review) {
  const { page } = review;
  const fields = review.missing.map((m) => m.field);
  for (const staged of page.records) {
    if (staged.record && typeof staged.record === "object") {
      for (const name of Object.keys(staged.record)) if (!fields.includes(name)) fields.push(name);
    }
  }
  const head = $("records-head");
  const body = $("records-body");
  head.replaceChildren(el("th", "#"), ...fields.map((name) => el("th", name)));
  body.replaceChildren(
    ...page.records.map((staged) => {
      const row = el("tr");
      row.append(el("td", String(staged.seq), "seq"));
      for (const name of fields) {
        const has = staged.record && Object.hasOwn(staged.record, name);
        const value = has ? staged.record[name] : undefined;
        row.append(el("td", shown(value), has && value !== null ? "" : "missing"));
      }
      return row;
    }),
  );
  const first = page.records.length ? page.records[0].seq : 0;
  const last = page.records.length ? page.records[page.records.length - 1].seq : 0;
  $("range").textContent = page.records.length
    ? `Records ${number.format(first)} to ${number.format(last)} of ${number.format(review.reviewed_count)}`
    : review.record_count
      ? "No staged records are kept any more."
      : "No records are staged yet.";
  $("previous").disabled = state.pages.length === 0;
  $("next").disabled = page.next_after === null;
}

function renderMissing(review) {
  const list = $("missing");
  const total = review.reviewed_count;
  $("missing-scope").textContent = `over all ${number.format(total)} records`;
  list.replaceChildren(
    ...review.missing.map(({ field, missing }) => {
      const item = el("li");
      item.append(el("span", field, "field"));
      if (missing === null) {
        item.append(el("span", "not counted", "count"));
        return item;
      }
      const meter = el("meter");
      meter.max = Math.max(total, 1);
      meter.optimum = 0; // none missing is best; some is a warning, more than half a problem
      meter.low = 0.5;
      meter.high = meter.max / 2;
      meter.value = missing;
      item.append(meter, el("span", `${number.format(missing)} missing`, "count"));
      item.dataset.missing = String(missing);
      return item;
    }),
  );
  $("missing-none").hidden = review.missing.length > 0;
}

function renderQuestion(review) {
  const question = review.question;
  $("question-box").hidden = !question;
  if (!question) return;
  $("question-title").textContent =
    question.purpose === "void" ? "Aborting now voids the batch, and asks you first" : "Committing asks you first";
  $("question").textContent = question.text;
  const binds = [`${number.format(question.record_count)} records`];
  if (question.legacy_batch_id) binds.push(`legacy batch ${question.legacy_batch_id}`);
  binds.push(question.content_digest ? `content digest ${question.content_digest}` : "content digest not available");
  $("binds").textContent = binds.join(" · ");
  $("digest").textContent = question.content_digest ?? "";
}

function buttons() {
  const review = state.review;
  const status = review?.status;
  $("commit").disabled = state.busy || status !== "open" || !review?.question;
  $("abort").disabled = state.busy || !["open", "committing", "outcome_unknown", "committed", "compensating"].includes(status);
}

// sent === null: no count to show (an outcome being resolved), the bar moves without one.
function progress(sent, total, text) {
  $("progress-box").hidden = false;
  const bar = $("progress");
  bar.max = Math.max(total ?? 0, 1);
  if (sent === null) bar.removeAttribute("value");
  else bar.value = Math.min(sent ?? 0, bar.max);
  $("progress-text").textContent = text ?? `${number.format(sent ?? 0)} of ${number.format(total ?? 0)} records sent`;
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A commit or an abort waits for the person to answer the host's question: longer than a read.
const ANSWER_MS = 15 * 60 * 1000;

async function call(name, args, timeout) {
  const result = await app.callServerTool({ name, arguments: args }, timeout ? { timeout } : undefined);
  if (result.isError) throw new Error(textOf(result));
  return result.structuredContent;
}

// While a commit runs (here or anywhere): its progress from get_operation_status, until it ends.
async function follow() {
  if (state.following || !state.handle) return;
  state.following = true;
  try {
    for (;;) {
      const status = await call(tools.get_import_status, { handle: state.handle });
      if (state.review && status.status !== state.review.status) showStatus(status.status);
      const commit = [...status.operations].reverse().find((op) => op.kind === "commit");
      if (commit && commit.status === "in_progress") {
        const op = await call(tools.get_operation_status, { operation_id: commit.operation_id });
        // records_sent is given only while the commit runs: one that ended between the two calls
        // keeps the bar where it was, and the next round (or the refresh after it) shows the end.
        if (op.status === "in_progress") progress(op.records_sent, op.record_count);
      } else if (status.status === "outcome_unknown") {
        progress(null, 1, "Waiting for the legacy system to confirm whether the batch landed.");
      }
      if (!FOLLOWED.has(status.status) && !state.busy) break;
      await pause(status.status === "outcome_unknown" ? 2000 : 400);
    }
  } catch (error) {
    notice(`Following the commit failed: ${error?.message ?? error}`, "error");
  } finally {
    state.following = false;
  }
  await refresh();
}

// A button's call: the person answers the host's question meanwhile; the commit's progress is
// followed beside it (follow() ends by itself once nothing runs any more).
async function act(name, args, done) {
  state.busy = true;
  buttons();
  notice("");
  follow();
  try {
    done(await call(name, args, ANSWER_MS));
  } catch (error) {
    notice(error?.message ?? String(error), "error");
  } finally {
    state.busy = false;
    buttons();
    await refresh();
  }
}

$("commit").addEventListener("click", () => {
  // One key per view and import: a second click, or the host resending the call, never commits twice.
  state.key ??= `review-${state.review.import_id}-${crypto.getRandomValues(new Uint32Array(2)).join("")}`;
  act(tools.commit_import, { handle: state.handle, idempotency_key: state.key }, (out) => {
    // The tool's message tells a model what to call next; a person reads what this view does.
    if (out.status === "declined") notice("You declined: nothing was committed; the import is still open.");
    else if (out.status === "in_progress") notice("The commit goes on in the background on the server; this view follows it.");
    else if (out.status === "outcome_unknown") notice("The commit's outcome is being resolved with the legacy system; this view follows it. It will not be sent again.");
    else if (out.status === "committed") notice(`Committed ${number.format(out.record_count)} records.`, "success");
    else if (out.status === "cancelled") notice("The commit stopped before COMMIT; nothing was committed.");
    else notice(out.status);
  });
});

$("abort").addEventListener("click", () => {
  act(tools.abort_import, { handle: state.handle }, (out) => {
    if (out.status === "declined") notice("You declined: nothing was voided or stopped.");
    else if (out.abort_requested) notice("The abort is recorded: the commit stops before COMMIT, or what lands is voided; this view follows it.");
    else notice(`The import is ${out.status}.`, out.status === "compensating" ? "error" : "success");
  });
});

$("next").addEventListener("click", () => {
  const next = state.review?.page?.next_after;
  if (next === null || next === undefined) return;
  state.pages.push(state.after);
  state.after = next;
  refresh();
});

$("previous").addEventListener("click", () => {
  if (!state.pages.length) return;
  state.after = state.pages.pop();
  refresh();
});

app.connect().then(
  () => applyContext(app.getHostContext()),
  (error) => notice(`The host did not connect: ${error?.message ?? error}`, "error"),
);
