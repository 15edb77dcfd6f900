"use strict";
(() => {
  const POLL_MS = 1000;
  const SVG = "http://www.w3.org/2000/svg";
  const W = 680, H = 240, PAD = { left: 56, right: 56, top: 14, bottom: 26 };
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
    if (response.status === 401) { showLogin(); throw new Error("unknown token"); }
    const body = response.status === 204 ? null : await response.json();
    if (!response.ok) throw new Error(body && body.error ? body.error.message : response.statusText);
    return body;
  }

  function showLogin() {
    sessionStorage.removeItem("stoker-token");
    token = "";
    $("login").hidden = false;
    $("main").hidden = true;
  }

  function select(id) {
    selected = id;
    sessionStorage.setItem("stoker-session", id);
    refresh();
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
      meta.textContent = `${s.model} · ${s.messages} messages`;
      button.append(meta);
      button.addEventListener("click", () => select(s.id));
      item.append(button);
      list.append(item);
    }
  }

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const money = (usd) => (usd === null || usd === undefined ? "?" : "$" + usd.toFixed(6));

  function renderChart(usage) {
    const svg = $("chart");
    const requests = usage.requests;
    svg.replaceChildren();
    svg.dataset.count = String(requests.length);
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const maxTokens = Math.max(1, ...requests.map((r) => r.usage.input_total));
    let running = 0;
    const cumulative = requests.map((r) => (running += r.cost_usd || 0));
    const maxCost = Math.max(1e-9, ...cumulative);
    const slot = plotW / Math.max(requests.length, 1);
    const barW = Math.max(2, Math.min(36, slot * 0.7));
    svg.append(el("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, stroke: "#999" }));
    svg.append(el("text", { x: PAD.left - 6, y: PAD.top + 10, "text-anchor": "end", "font-size": 10 }, maxTokens.toLocaleString()));
    svg.append(el("text", { x: PAD.left - 6, y: H - PAD.bottom, "text-anchor": "end", "font-size": 10 }, "0"));
    svg.append(el("text", { x: W - 4, y: PAD.top + 10, "text-anchor": "end", "font-size": 10, fill: "#c2364b" }, money(maxCost)));
    const points = [];
    requests.forEach((r, i) => {
      const x = PAD.left + i * slot + (slot - barW) / 2;
      const group = el("g", { "data-request": i, "data-turn": r.turn, "data-verdict": r.explanation.verdict,
        "data-purpose": r.purpose, opacity: r.purpose === "turn" ? 1 : 0.55 });
      const what = r.purpose === "turn" ? `turn ${r.turn}` : `keep-warm ${r.purpose} after turn ${r.turn}`;
      group.append(el("title", {}, `#${i + 1} ${what}: read ${r.usage.read}, written ${r.usage.written}, ` +
        `uncached ${r.usage.uncached}, ${money(r.cost_usd)} — ${r.explanation.text}`));
      let y = H - PAD.bottom;
      for (const [bucket, color] of [["read", "#2e9e5b"], ["written", "#e39b2d"], ["uncached", "#9aa3b5"]]) {
        const h = (r.usage[bucket] / maxTokens) * plotH;
        y -= h;
        group.append(el("rect", { x, y, width: barW, height: Math.max(h, 0), fill: color, "data-bucket": bucket }));
      }
      svg.append(group);
      points.push(`${x + barW / 2},${H - PAD.bottom - (cumulative[i] / maxCost) * plotH}`);
      svg.append(el("text", { x: x + barW / 2, y: H - 8, "text-anchor": "middle", "font-size": 10 }, String(i + 1)));
    });
    if (points.length) {
      svg.append(el("polyline", { points: points.join(" "), fill: "none", stroke: "#c2364b", "stroke-width": 2, "data-cost": "cumulative" }));
    }
    const u = usage.usage;
    $("title").textContent = `${usage.session_id} (${usage.model})`;
    const kw = usage.keep_warm;
    $("totals").textContent = `${requests.length} requests · read ${u.read} · written ${u.written} · ` +
      `uncached ${u.uncached} · output ${u.output} · ${money(usage.cost_usd)}` +
      (kw.requests ? ` · keep-warm: ${kw.requests} requests, ${money(kw.cost_usd)}` : "");
    const rows = $("requests");
    rows.replaceChildren();
    requests.forEach((r, i) => {
      const tr = document.createElement("tr");
      tr.dataset.request = String(i);
      tr.dataset.purpose = r.purpose;
      const turn = r.purpose === "turn" ? r.turn : `${r.turn} (${r.purpose})`;
      for (const cell of [i + 1, turn, r.usage.read, r.usage.written, r.usage.uncached, r.usage.output,
        money(r.cost_usd), r.explanation.text]) {
        const td = document.createElement("td");
        td.textContent = String(cell);
        tr.append(td);
      }
      rows.append(tr);
    });
  }

  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const { sessions } = await api("/v1/sessions");
      if (!selected && sessions.length) selected = sessions[0].id;
      renderSessions(sessions);
      if (selected) renderChart(await api(`/v1/sessions/${encodeURIComponent(selected)}/usage`));
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
    refresh();
  });

  if (token) { $("main").hidden = false; refresh(); } else { showLogin(); status("sign in"); }
})();
