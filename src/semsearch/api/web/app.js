// The semsearch web UI: one module, no dependencies, the same /v1 calls as every client.
// Text from the index (file names, chunks, log lines) is only ever set as text, never as
// HTML: a file in somebody's folder must not be able to script this page.

const TOKEN_KEY = "semsearch.token";
const CONTEXT_LINES = 12;
const PREVIEW_CHARS = 700;

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) node.append(child);
  }
  return node;
}

// --- talking to the API ----------------------------------------------------------

class Problem extends Error {
  constructor(detail, status = 0) {
    super(detail);
    this.status = status;
  }
}

async function detailOf(response) {
  try {
    const body = await response.json();
    if (typeof body.detail === "string") return body.detail;
    if (Array.isArray(body.detail)) return body.detail.map((d) => d.msg || String(d)).join("; ");
  } catch {
    // not JSON: fall through to the status line
  }
  return `the API answered ${response.status} ${response.statusText}`;
}

let tokenPrompt = null; // one dialog for every request that met a 401 at the same time

function askToken(reason) {
  if (tokenPrompt) return tokenPrompt;
  const dialog = $("token-dialog");
  $("token-reason").textContent = reason;
  $("token-input").value = "";
  tokenPrompt = new Promise((resolve) => {
    const done = (value) => {
      dialog.removeEventListener("close", onClose);
      $("token-form").removeEventListener("submit", onSubmit);
      if (dialog.open) dialog.close();
      tokenPrompt = null;
      resolve(value);
    };
    const onSubmit = (event) => {
      event.preventDefault();
      done($("token-input").value.trim() || null);
    };
    const onClose = () => done(null);
    $("token-form").addEventListener("submit", onSubmit);
    dialog.addEventListener("close", onClose);
    $("token-cancel").onclick = () => done(null);
    dialog.showModal();
    $("token-input").focus();
  });
  return tokenPrompt;
}

async function api(method, path, body) {
  for (;;) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch {
      throw new Problem("the semsearch API did not answer; check that it is running (semsearch serve) and reload the page");
    }
    if (response.status === 401) {
      const detail = await detailOf(response);
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenButton();
      const reason = token
        ? "That token was refused. Enter the API's token (SEMSEARCH_TOKEN)."
        : "This API asks for a bearer token (SEMSEARCH_TOKEN).";
      const entered = await askToken(reason);
      if (!entered) throw new Problem(`${detail} (no token entered)`, 401);
      sessionStorage.setItem(TOKEN_KEY, entered);
      showTokenButton();
      continue;
    }
    if (!response.ok) throw new Problem(await detailOf(response), response.status);
    return response.status === 204 ? null : response.json();
  }
}

function showProblem(error) {
  $("problem-text").textContent = error instanceof Problem ? error.message : `unexpected error: ${error}`;
  $("problem").hidden = false;
}

function clearProblem() {
  $("problem").hidden = true;
}

function showTokenButton() {
  $("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
}

// --- formatting ---------------------------------------------------------------------

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "never";
}

function list(text) {
  const items = text.split(/[,\s]+/).map((s) => s.trim().replace(/^\./, "")).filter(Boolean);
  return items.length ? items : undefined;
}

function queryTerms(query) {
  return query.match(/[\p{L}\p{N}_]{2,}/gu) || [];
}

// The chunk text with the query's words in <mark> (whole words: "the" is not marked in "them"),
// built as nodes.
function highlighted(text, terms) {
  const words = [...new Set(terms.map((t) => t.toLowerCase()))].sort((a, b) => b.length - a.length);
  if (!words.length) return [text];
  const escaped = words.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(${escaped.join("|")})(?![\\p{L}\\p{N}])`, "giu");
  return text.split(pattern).map((part, i) => (i % 2 ? el("mark", { text: part }) : part));
}

function labelClass(label) {
  const kind = (label.match(/^\[(\w+)/) || [])[1] || "other";
  return `label label-${kind}`;
}

// --- search ---------------------------------------------------------------------------

async function search(event) {
  event?.preventDefault();
  const query = $("q").value.trim();
  if (!query) return;
  clearProblem();
  const folder = $("f-folder").value;
  const body = {
    query,
    k: 20,
    folder: folder ? [folder] : undefined,
    ext: list($("f-ext").value),
    pathGlob: list($("f-glob").value),
    mode: $("f-mode").value || undefined,
    includeAll: $("f-all").checked || undefined,
    arms: true, // for the terms the keyword arm used, which are the ones worth marking
  };
  $("search-message").textContent = "Searching…";
  $("hits").replaceChildren();
  history.replaceState(null, "", `#search?q=${encodeURIComponent(query)}`);
  try {
    const answer = await api("POST", "/v1/search", body);
    const terms = answer.arms?.lexicalTerms?.length ? answer.arms.lexicalTerms : queryTerms(query);
    $("hits").replaceChildren(...answer.hits.map((hit) => hitView(hit, terms)));
    $("search-message").textContent = answer.hits.length
      ? `${answer.hits.length} chunks in ${Math.round(answer.tookMs)} ms (${answer.mode})`
      : answer.message || "Nothing relevant found.";
  } catch (error) {
    $("search-message").textContent = "";
    showProblem(error);
  }
}

function hitView(hit, terms) {
  const where = hit.location ? `${hit.location}, lines ${hit.startLine}–${hit.endLine}` : `lines ${hit.startLine}–${hit.endLine}`;
  const preview = hit.text.length > PREVIEW_CHARS ? `${hit.text.slice(0, PREVIEW_CHARS)}…` : hit.text;
  return el(
    "li",
    { class: "hit" },
    el(
      "div",
      { class: "hit-head" },
      el("span", { class: labelClass(hit.label), text: hit.label, title: hit.cosine === null ? "not embedded yet" : `cosine ${hit.cosine.toFixed(3)}` }),
      el("button", { type: "button", class: "link hit-file", text: `${hit.folder}/${hit.relPath}`, title: hit.filePath,
        onclick: () => openChunk(hit, terms) }),
      el("span", { class: "where", text: where }),
      hit.stale ? el("span", { class: "stale", text: "changed since indexed" }) : null,
    ),
    hit.heading ? el("div", { class: "crumbs", text: hit.heading.split(" > ").join(" › ") }) : null,
    el("pre", { class: "preview" }, highlighted(preview, terms)),
  );
}

async function openChunk(hit, terms) {
  clearProblem();
  const start = Math.max(1, hit.startLine - CONTEXT_LINES);
  const end = hit.endLine + CONTEXT_LINES;
  const params = new URLSearchParams({ path: hit.filePath, startLine: start, endLine: end });
  try {
    const file = await api("GET", `/v1/files?${params}`);
    const lines = file.text.split("\n");
    const rows = lines.map((line, i) => {
      const number = file.startLine + i;
      const inChunk = number >= hit.startLine && number <= hit.endLine;
      return el("span", { class: inChunk ? "line in-chunk" : "line", "data-line": number },
        el("span", { class: "ln", text: String(number) }), inChunk ? highlighted(line, terms) : line, "\n");
    });
    $("viewer-title").textContent = `${file.folder}/${file.relPath} · lines ${file.startLine}–${file.endLine} of ${file.totalLines}`;
    $("viewer-text").replaceChildren(...rows);
    $("viewer").showModal();
    $("viewer-text").querySelector(".in-chunk")?.scrollIntoView({ block: "center" });
  } catch (error) {
    showProblem(error);
  }
}

async function loadFolderChoices() {
  try {
    const folders = await api("GET", "/v1/folders");
    const select = $("f-folder");
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "", text: "all folders" }),
      ...folders.map((f) => el("option", { value: f.name, text: f.name })));
    select.value = chosen;
  } catch (error) {
    showProblem(error);
  }
}

// --- status and runs ------------------------------------------------------------------

async function loadStatus() {
  clearProblem();
  try {
    const [status, runs] = await Promise.all([api("GET", "/v1/status"), api("GET", "/v1/runs")]);
    renderStatus(status);
    const current = runs.find((r) => r.state === "queued" || r.state === "running") || runs[0];
    if (current) {
      renderRun(current);
      if (current.state === "queued" || current.state === "running") followRun(current.id);
    }
  } catch (error) {
    showProblem(error);
  }
}

function switchLine(s) {
  const counts = s.total ? `${s.embedded.toLocaleString()} of ${s.total.toLocaleString()} chunks` : "starting";
  return `${s.state}: ${s.fromModel || "?"} → ${s.toModel || s.target || "?"} (${counts})${s.error ? ` — ${s.error}` : ""}`;
}

// A query replica's copy of an index on object storage (as `semsearch status` words it).
function copyLine(c) {
  if (c.storeBytes != null) return `none: the tables take ${bytes(c.storeBytes)}, over SEMSEARCH_LOCAL_COPY_MB; reading the store`;
  const held = `${c.files.toLocaleString()} files, ${bytes(c.bytes)} on local disk`;
  let line = c.answering ? `${held}, answering` : `${held}, being made (reading the store until then)`;
  if (c.syncedAt) line += `; synced ${new Date(c.syncedAt).toLocaleTimeString()}`;
  return c.error ? `${line}; last sync failed: ${c.error}` : line;
}

function renderStatus(status) {
  const e = status.embedder;
  const facts = [
    ["Version", status.version],
    ["Embedder", e.ready ? `${e.modelId} (${e.dimension} dimensions, ${e.quantisation || "float"})` : `down: ${e.error}`],
    ...(e.cpu ? [["CPU", e.cpu]] : []),
    ["Embedder address", e.address],
    ...(status.modelSwitch ? [["Model switch", switchLine(status.modelSwitch)]] : []),
    ["Files / chunks", `${status.files.toLocaleString()} / ${status.chunks.toLocaleString()}`],
    ["Vector index", status.vectorIndex],
    ["Full-text index", status.fullTextIndex ? "ready" : "not built yet"],
    ["In memory", status.inMemory == null ? "no (LanceDB answers)" : `${status.inMemory.toLocaleString()} chunks, ${bytes(status.inMemoryBytes)}`],
    ...(status.localCopy == null ? [] : [["Local copy", copyLine(status.localCopy)]]),
    // Shown only to tokens that cover every folder: a folder-limited one gets neither.
    ...(status.indexBytes == null ? [] : [["Index size", bytes(status.indexBytes)]]),
    ...(status.dataDir == null ? [] : [["Data directory", status.dataDir]]),
  ];
  $("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
  $("status-notice").hidden = !status.notice;
  $("status-notice").textContent = status.notice || "";
  const rows = status.folders.map((f) =>
    el("tr", {},
      el("th", { scope: "row", text: f.name }),
      el("td", { class: "path", text: f.path }),
      el("td", { class: "num", text: f.files.toLocaleString() }),
      el("td", { class: "num", text: f.chunks.toLocaleString() + (f.embeddedChunks != null && f.embeddedChunks < f.chunks
        ? ` (${f.embeddedChunks.toLocaleString()} embedded so far)` : "") }),
      el("td", { text: when(f.lastIndexed) }),
      el("td", {}, el("button", { type: "button", class: "quiet", text: "Index", "aria-label": `Index ${f.name}`,
        onclick: () => requestRun(f.name) }))));
  const empty = el("tr", {}, el("td", { colspan: 6, class: "message",
    text: "No folders yet: add one with `semsearch add PATH` or POST /v1/folders." }));
  $("folders").tBodies[0].replaceChildren(...(rows.length ? rows : [empty]));
}

let followed = null;

async function requestRun(folder) {
  clearProblem();
  try {
    const run = await api("POST", "/v1/runs", { folder: folder || undefined, force: $("index-force").checked || undefined });
    renderRun(run);
    followRun(run.id);
  } catch (error) {
    showProblem(error);
  }
}

// Long-polls the run (the API holds each request up to a second) until it finishes.
async function followRun(id) {
  if (followed === id) return;
  followed = id;
  try {
    for (;;) {
      const run = await api("GET", `/v1/runs/${encodeURIComponent(id)}?wait=1`);
      if (followed !== id) return;
      renderRun(run);
      if (!["queued", "running"].includes(run.state)) break;
    }
    await loadStatusFacts();
  } catch (error) {
    showProblem(error);
  } finally {
    if (followed === id) followed = null;
  }
}

async function loadStatusFacts() {
  renderStatus(await api("GET", "/v1/status"));
  loadFolderChoices();
}

function renderRun(run) {
  $("run").hidden = false;
  $("run").dataset.state = run.state;
  $("run-id").textContent = run.id;
  const p = run.progress;
  const target = run.request.folder ? `folder ${run.request.folder}` : "all folders";
  let state = `${run.state} · ${target}`;
  if (run.state === "queued") state += " · waiting for an indexer worker (semsearch serve starts one)";
  if (run.state === "running") state += ` · ${p.filesDone} of ${p.filesTotal || "?"} files, ${p.chunks} chunks`;
  if (run.cancelRequested && run.state === "running") state += " · cancelling";
  if (run.error) state += ` · ${run.error}`;
  $("run-state").textContent = state;
  const progress = $("run-progress");
  if (run.state === "running" && p.filesTotal) {
    progress.max = p.filesTotal;
    progress.value = p.filesDone;
  } else if (run.state === "done") {
    progress.max = 1;
    progress.value = 1;
  } else {
    progress.removeAttribute("value"); // indeterminate while queued
  }
  $("run-cancel").hidden = !["queued", "running"].includes(run.state);
  $("run-cancel").onclick = () => cancelRun(run.id);
  $("run-summary").replaceChildren(...summaryView(run));
  $("run-log").replaceChildren(...run.log.map((line) => el("span", { class: `log-${line.stream}`, text: `${line.text}\n` })));
}

function summaryView(run) {
  const s = run.summary;
  if (!s) return [];
  const facts = [
    ["Files indexed", s.filesProcessed],
    ["Unchanged, skipped", s.filesSkipped],
    ["Deleted", s.filesDeleted],
    ["Chunks written", s.chunksWritten],
    ["Seconds", s.seconds.toFixed(1)],
  ];
  const out = [el("dl", { class: "facts" }, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })]))];
  const skipped = Object.entries(s.skippedBy || {});
  if (skipped.length) {
    out.push(el("p", { text: `Not indexed, by rule: ${skipped.map(([rule, n]) => `${rule} ${n}`).join(", ")}` }));
  }
  if (s.unindexable.length) {
    out.push(el("h3", { text: `Unindexable files (${s.unindexable.length})` }),
      el("ul", { class: "unindexable" }, s.unindexable.map((u) =>
        el("li", {}, el("code", { text: u.path }), ` — ${u.reason}: ${u.detail}`))));
  }
  if (s.errors.length) out.push(el("h3", { text: "Errors" }), el("ul", {}, s.errors.map((e) => el("li", { text: e }))));
  return out;
}

async function cancelRun(id) {
  try {
    renderRun(await api("DELETE", `/v1/runs/${encodeURIComponent(id)}`));
  } catch (error) {
    showProblem(error);
  }
}

// --- explain ------------------------------------------------------------------------

async function explain(event) {
  event?.preventDefault();
  const path = $("explain-path").value.trim();
  if (!path) return;
  clearProblem();
  history.replaceState(null, "", `#explain?path=${encodeURIComponent(path)}`);
  try {
    const x = await api("GET", `/v1/explain?${new URLSearchParams({ path })}`);
    const verdict = x.indexed
      ? x.inIndex ? "Indexed, and in the index." : "Would be indexed, but is not in the index yet: run an index."
      : "Not indexed.";
    const facts = [
      ["Rule", x.rule],
      ["Why", x.detail],
      ["Folder", x.folder ? `${x.folder} / ${x.relPath}` : "none of the registered folders"],
      ["Chunks in the index", x.chunks],
    ];
    if (x.stale !== null && x.stale !== undefined) facts.push(["Changed since indexed", x.stale ? "yes: run an index" : "no"]);
    if (x.secretsRedacted) facts.push(["Secrets redacted", x.secretsRedacted]);
    $("explained").replaceChildren(
      el("p", { class: x.indexed ? "verdict ok" : "verdict no", text: verdict }),
      el("dl", { class: "facts" }, facts.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: String(v) })])),
    );
  } catch (error) {
    $("explained").replaceChildren();
    showProblem(error);
  }
}

// --- views and keys ------------------------------------------------------------------

function route() {
  const [view, query = ""] = (location.hash.slice(1) || "search").split("?");
  const name = ["search", "status", "explain"].includes(view) ? view : "search";
  for (const panel of document.querySelectorAll("[data-view-panel]")) panel.hidden = panel.dataset.viewPanel !== name;
  for (const link of document.querySelectorAll("nav [data-view]")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const params = new URLSearchParams(query);
  if (name === "status") loadStatus();
  if (name === "search") {
    if (params.get("q") && params.get("q") !== $("q").value) {
      $("q").value = params.get("q");
      search();
    }
    $("q").focus();
  }
  if (name === "explain") {
    if (params.get("path") && params.get("path") !== $("explain-path").value) {
      $("explain-path").value = params.get("path");
      explain();
    }
    $("explain-path").focus();
  }
}

function onKey(event) {
  const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement?.tagName);
  if (event.key === "/" && !typing && !document.querySelector("dialog[open]")) {
    event.preventDefault();
    if (location.hash.split("?")[0] !== "#search" && location.hash !== "") location.hash = "#search";
    $("q").focus();
    $("q").select();
  }
}

function start() {
  $("search-form").addEventListener("submit", search);
  $("explain-form").addEventListener("submit", explain);
  $("index-all").addEventListener("click", () => requestRun(null));
  $("problem-close").addEventListener("click", clearProblem);
  $("viewer-close").addEventListener("click", () => $("viewer").close());
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenButton();
  });
  document.addEventListener("keydown", onKey);
  window.addEventListener("hashchange", route);
  showTokenButton();
  loadFolderChoices();
  route();
  document.body.dataset.ready = "true";
}

start();
