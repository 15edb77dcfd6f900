"use strict";
(() => {
  const POLL_MS = 1000;
  const TOTALS_EVERY = 5; // polls between two fetches of the user's totals (they read every session)
  const SVG = "http://www.w3.org/2000/svg";
  // The chart is as wide as its column (W, set at each drawing, one unit a pixel, so text
  // keeps its size) and H tall.
  let W = 760;
  const H = 280, PAD = { left: 56, right: 60, top: 22, bottom: 46 };
  const COLORS = { read: "#2e9e5b", written: "#e39b2d", uncached: "#9aa3b5", cost: "#6f4fb5",
    ttl: "#cfe8d8", expired: "#d1242f", miss: "#d1242f", declared: "#1f6feb" };
  const $ = (id) => document.getElementById(id);

  // The token may arrive in the fragment (never sent to the server, so never logged);
  // it is kept for this tab only and the fragment is cleared.
  const fragment = new URLSearchParams(location.hash.slice(1));
  let token = fragment.get("token") || sessionStorage.getItem("stoker-token") || "";
  let selected = fragment.get("session") || sessionStorage.getItem("stoker-session") || "";
  if (token) sessionStorage.setItem("stoker-token", token);
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);

  const status = (text) => { $("status").textContent = text; };

  async function api(path, options = {}) {
    const headers = { Authorization: "Bearer " + token, ...(options.headers || {}) };
    const response = await fetch(path, { ...options, headers });
    if (response.status === 401) {
      showLogin("This gateway does not know that token: check it with whoever runs the gateway.");
      throw new Error("unknown token");
    }
    const body = response.status === 204 ? null : await response.json();
    if (!response.ok) throw new Error(body && body.error ? body.error.message : response.statusText);
    return body;
  }

  function showLogin(problem) {
    sessionStorage.removeItem("stoker-token");
    token = "";
    $("login").hidden = false;
    $("main").hidden = true;
    $("login-error").hidden = !problem;
    $("login-error").textContent = problem || "";
  }

  function select(id) {
    selected = id;
    sessionStorage.setItem("stoker-session", id);
    refresh();
  }

  // A price no table knows is "no price" for that call; totals never turn into "?":
  // they sum the priced calls and count the others (`unpriced_calls`).
  function money(usd) {
    if (usd === null || usd === undefined) return "no price";
    const digits = Math.abs(usd) >= 1 ? 2 : Math.abs(usd) >= 0.01 ? 4 : 6;
    return "$" + usd.toFixed(digits);
  }
  const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`; // "1 call", "2 calls"
  const percent = (ratio) => (100 * ratio).toFixed(1) + "%";
  const clock = (seconds) => new Date(seconds * 1000).toLocaleTimeString([], { hour12: false });
  function duration(seconds) {
    if (seconds < 90) return Math.round(seconds) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    return (seconds / 3600).toFixed(1) + " h";
  }

  function renderSessions(sessions) {
    const list = $("sessions");
    list.replaceChildren();
    for (const s of sessions) {
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.session = s.id;
      button.setAttribute("aria-current", String(s.id === selected));
      button.textContent = s.title || "(no messages yet)";
      const meta = document.createElement("small");
      meta.textContent = `${s.model} · ${count(s.messages, "message")} · ${s.id.slice(0, 8)}`;
      button.append(meta);
      button.addEventListener("click", () => select(s.id));
      item.append(button);
      list.append(item);
    }
  }

  function renderSpend(spend) {
    $("saved").textContent = money(spend.savings_usd);
    $("saved").dataset.usd = String(spend.savings_usd);
    $("cost").textContent = money(spend.cost_usd);
    $("cost").dataset.usd = String(spend.cost_usd);
    $("no-cache").textContent = money(spend.no_cache_usd);
    $("no-cache").dataset.usd = String(spend.no_cache_usd);
    $("hit-ratio").textContent = percent(spend.hit_ratio);
    $("hit-ratio").dataset.ratio = String(spend.hit_ratio);
    $("unpriced").textContent = String(spend.unpriced_calls);
    $("unpriced").dataset.count = String(spend.unpriced_calls);
  }

  // The cache clock (`warm_until`, `next_cost_now`, `next_cost_cold` of the session's
  // JSON, computed by stoker.agent.cache_clock): how long the prefix stays cached and what
  // the next message's input costs while it does and after. Drawn on every poll, so the
  // time left counts down.
  function renderClock(usage) {
    const node = $("cache-clock");
    const until = usage.warm_until;
    node.dataset.warmUntil = until == null ? "" : String(until);
    node.dataset.nowUsd = String(usage.next_cost_now);
    node.dataset.coldUsd = String(usage.next_cost_cold);
    node.dataset.warm = "false";
    if (!usage.requests.length) { node.textContent = "cache: nothing sent yet"; return; }
    if (until == null) {
      node.textContent = "cache: nothing cached (under the model's minimum) · next message: input " +
        money(usage.next_cost_cold);
      return;
    }
    const left = until - Date.now() / 1000;
    const tokens = (usage.cached_tokens || 0).toLocaleString();
    node.dataset.warm = String(left > 0);
    node.textContent = left > 0
      ? `cache: ${tokens} tokens warm until ${clock(until)} (${duration(left)} left) · next message: input ` +
        `${money(usage.next_cost_now)} now, ${money(usage.next_cost_cold)} after expiry`
      : `cache: expired at ${clock(until)} · next message: input ${money(usage.next_cost_cold)} ` +
        `(rewrites ${tokens} tokens; ${money(usage.next_cost_now)} while it was warm)`;
    const plan = usage.planned;
    if (plan && plan.action !== "expire") {
      const small = document.createElement("small");
      small.textContent = `keep-warm: ${plan.action} at ${clock(plan.at)} for ${money(plan.cost_usd)}, ` +
        `keeps it until ${clock(plan.covers_until)}`;
      node.append(small);
    }
  }

  function renderTotals(totals) {
    const s = totals.spend;
    const node = $("user-totals");
    node.dataset.sessions = String(totals.sessions);
    node.dataset.savingsUsd = String(s.savings_usd);
    node.dataset.unpriced = String(s.unpriced_calls);
    node.textContent = `All your sessions (${totals.sessions}): ${count(s.calls, "call")} · cost ${money(s.cost_usd)} ` +
      `against ${money(s.no_cache_usd)} without a cache · saved ${money(s.savings_usd)} · ` +
      `hit ratio ${percent(s.hit_ratio)}` +
      (s.unpriced_calls ? ` · ${s.unpriced_calls} ${s.unpriced_calls === 1 ? "call" : "calls"} with no ` +
        "known price (not in the sums)" : "");
  }

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Where each request goes on the time axis. Time runs left to right at one scale, so
  // a gap longer than a TTL is visibly longer than the entry's life; a gap past `cap` is
  // drawn as `cap` with a break mark, and requests closer than a bar apart are nudged.
  function layout(requests) {
    const plotW = W - PAD.left - PAD.right;
    const n = requests.length;
    const barW = Math.max(2, Math.min(18, plotW / Math.max(n, 1) / 1.6));
    const step = barW + 2;
    const cap = Math.max(600, 2 * Math.max(0, ...requests.map((r) => r.ttl_seconds)));
    const gaps = requests.map((r, i) => (i ? Math.max(0, r.started_at - requests[i - 1].started_at) : 0));
    const drawn = gaps.map((g) => Math.min(g, cap));
    const room = plotW - barW;
    const width = (s) => drawn.reduce((sum, d, i) => sum + (i ? Math.max(step, s * d) : 0), 0);
    let lo = 0, hi = room / Math.max(1e-9, drawn.reduce((a, b) => a + b, 0));
    for (let k = 0; k < 50; k++) { const mid = (lo + hi) / 2; if (width(mid) <= room) lo = mid; else hi = mid; }
    const xs = [];
    let x = PAD.left;
    requests.forEach((r, i) => { if (i) x += Math.max(step, lo * drawn[i]); xs.push(x); });
    return { xs, barW, scale: lo, gaps, cap };
  }

  function renderChart(usage) {
    const svg = $("chart");
    const requests = usage.requests;
    W = Math.max(480, Math.floor(svg.parentElement.clientWidth) - 2);
    svg.setAttribute("width", String(W));
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.replaceChildren();
    svg.dataset.count = String(requests.length);
    const plotH = H - PAD.top - PAD.bottom, base = H - PAD.bottom, right = W - PAD.right;
    const maxTokens = Math.max(1, ...requests.map((r) => r.usage.input_total));
    let running = 0;
    const cumulative = requests.map((r) => (running += r.cost_usd || 0));
    const maxCost = Math.max(1e-9, ...cumulative);
    const { xs, barW, scale, gaps, cap } = layout(requests);
    svg.append(el("line", { x1: PAD.left, y1: base, x2: right, y2: base, stroke: "#999" }));
    svg.append(el("text", { x: PAD.left - 6, y: PAD.top + 10, "text-anchor": "end", "font-size": 10 }, maxTokens.toLocaleString()));
    svg.append(el("text", { x: PAD.left - 6, y: base, "text-anchor": "end", "font-size": 10 }, "0"));
    svg.append(el("text", { x: W - 4, y: PAD.top + 10, "text-anchor": "end", "font-size": 10, fill: COLORS.cost }, money(maxCost)));
    svg.append(el("text", { x: PAD.left - 6, y: H - 6, "text-anchor": "end", "font-size": 10, fill: "#667", "data-axis": "time" }, "time →"));

    // Each entry's life under the axis: from its request for its TTL, or until the next
    // request used it again; past that the gap is marked expired.
    const lane = base + 4;
    requests.forEach((r, i) => {
      if (!r.ttl_seconds || r.kind === "uncacheable") return;
      const start = xs[i];
      const last = i === requests.length - 1;
      const refreshed = !last && gaps[i + 1] <= r.ttl_seconds;
      const end = refreshed ? xs[i + 1] : Math.min(right, start + scale * Math.min(r.ttl_seconds, cap));
      svg.append(el("rect", { x: start, y: lane, width: Math.max(1, end - start), height: 5, fill: COLORS.ttl,
        "data-ttl-band": i, "data-ttl": r.ttl_seconds }));
      if (!last && !refreshed) {
        svg.append(el("line", { x1: end, y1: lane + 2.5, x2: xs[i + 1], y2: lane + 2.5, stroke: COLORS.expired,
          "stroke-dasharray": "3 2", "stroke-width": 2, "data-expired-after": i }));
        svg.append(el("text", { x: (end + xs[i + 1]) / 2, y: lane + 15, "text-anchor": "middle", "font-size": 10,
          fill: COLORS.expired }, `expired after ${duration(r.ttl_seconds)}`));
      }
    });
    // Gaps longer than the axis shows: a break mark with the real length.
    gaps.forEach((g, i) => {
      if (g <= cap) return;
      const mid = (xs[i - 1] + barW + xs[i]) / 2;
      svg.append(el("text", { x: mid, y: base - 4, "text-anchor": "middle", "font-size": 11, fill: "#667",
        "data-gap-break": i }, `≈ ${duration(g)}`));
    });

    const points = [];
    let lastTick = -Infinity, lastLabel = "";
    requests.forEach((r, i) => {
      const x = xs[i];
      const group = el("g", { "data-request": i, "data-turn": r.turn, "data-verdict": r.explanation.verdict,
        "data-kind": r.kind, "data-purpose": r.purpose, "data-started": r.started_at,
        "data-x": x.toFixed(2), opacity: r.purpose === "turn" ? 1 : 0.55 });
      const what = r.purpose === "turn" ? `turn ${r.turn}` : `keep-warm ${r.purpose} after turn ${r.turn}`;
      group.append(el("title", {}, `#${i + 1} ${clock(r.started_at)} ${what}: read ${r.usage.read}, ` +
        `written ${r.usage.written}, uncached ${r.usage.uncached}, ${money(r.cost_usd)} — ${r.explanation.text}`));
      let y = base;
      for (const bucket of ["read", "written", "uncached"]) {
        const h = (r.usage[bucket] / maxTokens) * plotH;
        y -= h;
        group.append(el("rect", { x, y, width: barW, height: Math.max(h, 0), fill: COLORS[bucket], "data-bucket": bucket }));
      }
      if (r.kind === "miss" || r.kind === "declared") {
        const color = COLORS[r.kind];
        group.append(el("path", { d: `M${x - 1},${base} V${y - 1} H${x + barW + 1} V${base}`, fill: "none",
          stroke: color, "stroke-width": 2, "data-mark": r.kind }));
        group.append(el("path", { d: `M${x + barW / 2 - 5},${y - 12} h10 l-5,7 z`, fill: color }));
      }
      svg.append(group);
      points.push(`${x + barW / 2},${base - (cumulative[i] / maxCost) * plotH}`);
      // A time under a bar when there is room and it says something new: requests
      // within one second share the first one's label.
      const label = clock(r.started_at);
      if (x - lastTick >= 64 && label !== lastLabel) {
        lastTick = x;
        lastLabel = label;
        svg.append(el("text", { x, y: H - 6, "font-size": 10, "data-tick": i, "data-time": r.started_at }, label));
      }
    });
    if (points.length) {
      svg.append(el("polyline", { points: points.join(" "), fill: "none", stroke: COLORS.cost, "stroke-width": 2, "data-cost": "cumulative" }));
    }

    $("title").textContent = usage.title || "(no messages yet)";
    const kw = usage.keep_warm;
    $("session-id").textContent = `${usage.session_id} · ${usage.model} · ${count(requests.length, "request")}` +
      (kw.requests ? ` · keep-warm: ${count(kw.requests, "request")}, ${money(kw.cost_usd)}` : "") +
      (usage.rebases.length ? ` · declared breaks: ${usage.rebases.join("; ")}` : "");
    renderSpend(usage.spend);
    renderClock(usage);
    const rows = $("requests");
    rows.replaceChildren();
    requests.forEach((r, i) => {
      const tr = document.createElement("tr");
      tr.dataset.request = String(i);
      tr.dataset.purpose = r.purpose;
      tr.dataset.kind = r.kind;
      const turn = r.purpose === "turn" ? r.turn : `${r.turn} (${r.purpose})`;
      for (const cell of [i + 1, clock(r.started_at), turn, r.usage.read, r.usage.written, r.usage.uncached,
        r.usage.output, money(r.cost_usd), r.explanation.text]) {
        const td = document.createElement("td");
        td.textContent = String(cell);
        tr.append(td);
      }
      rows.append(tr);
    });
  }

  // The conversation turn by turn (`GET /v1/sessions/{id}`): each message, the tools its
  // turn ran, the answer.
  function renderTranscript(history) {
    const list = $("transcript");
    list.replaceChildren();
    list.dataset.turns = String(history.turns.length);
    const line = (kind, text) => {
      const p = document.createElement("p");
      p.className = kind;
      p.textContent = text;
      return p;
    };
    if (!history.turns.length) list.append(line("muted", "No messages yet: send one below."));
    for (const t of history.turns) {
      const item = document.createElement("li");
      item.dataset.turn = String(t.number);
      item.append(line("you", t.user));
      if (t.tools.length) item.append(line("tools", "tools: " + t.tools.join(", ")));
      item.append(line("answer", t.answer || "(no answer)"));
      list.append(item);
    }
    list.scrollTop = list.scrollHeight;
  }

  let timer = null;
  let polls = 0;
  let shown = ""; // the session and request count the transcript was drawn for
  async function refresh() {
    clearTimeout(timer);
    try {
      const { sessions } = await api("/v1/sessions");
      if (!selected && sessions.length) selected = sessions[0].id;
      renderSessions(sessions);
      if (polls++ % TOTALS_EVERY === 0) renderTotals(await api("/v1/usage"));
      if (selected) {
        const path = `/v1/sessions/${encodeURIComponent(selected)}`;
        const usage = await api(path + "/usage");
        renderChart(usage);
        const key = `${selected} ${usage.requests.length}`;
        if (key !== shown) { renderTranscript(await api(path)); shown = key; }
      }
      status("updated " + new Date().toLocaleTimeString());
    } catch (error) {
      status(String(error.message || error));
    }
    if (token) timer = setTimeout(refresh, POLL_MS);
  }

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value.trim();
    sessionStorage.setItem("stoker-token", token);
    $("login").hidden = true;
    $("main").hidden = false;
    refresh();
  });
  $("new-session").addEventListener("click", async () => {
    try { select((await api("/v1/sessions", { method: "POST", body: "{}" })).id); }
    catch (error) { status(String(error.message || error)); }
  });
  $("send").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("text").value;
    if (!text.trim() || !selected) return;
    $("text").value = "";
    status("sending…");
    try {
      const reply = await api(`/v1/sessions/${encodeURIComponent(selected)}/messages`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ text }),
      });
      if (reply.new_session_id) selected = reply.new_session_id;
    } catch (error) { status(String(error.message || error)); }
    polls = 0; // a sent message changes the totals too
    refresh();
  });

  if (token) { $("main").hidden = false; refresh(); } else { showLogin(); status("sign in"); }
})();
