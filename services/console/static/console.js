// Odradek console: live refresh of [data-live] regions, charts, table filter, shortcuts.
// No libraries: the page is rendered on the server; this only keeps it current.
"use strict";
(function () {
  // Live refresh every 3 s, slower when the page is expensive to build: the next refresh
  // waits at least ten times as long as the last one took (at most 10% of the server's time).
  const REFRESH_MS = 3000;
  let nextRefresh = REFRESH_MS;
  const COLORS = ["#1f5fbf", "#c2410c", "#1a7f37", "#7c3aed"];

  function visible() { return document.visibilityState === "visible"; }

  // -- live regions: re-fetch this URL and swap regions whose HTML changed ------------
  async function refreshLive() {
    const regions = document.querySelectorAll("[data-live][id]");
    // A page answering a form post (a preview, an error) has no URL to re-fetch.
    if (!regions.length || !visible() || document.body.hasAttribute("data-posted")) return;
    const state = document.getElementById("live-state");
    const started = performance.now();
    try {
      const resp = await fetch(location.href, { headers: { "X-Console-Live": "1" }, cache: "no-store" });
      if (!resp.ok) throw new Error(resp.status);
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      regions.forEach((region) => {
        if (region.contains(document.activeElement) && document.activeElement !== document.body) return;
        const fresh = doc.getElementById(region.id);
        if (fresh && fresh.innerHTML !== region.innerHTML) {
          region.innerHTML = fresh.innerHTML;
          applyFilters();
        }
      });
      if (state) state.textContent = "live · " + new Date().toLocaleTimeString();
    } catch (err) {
      if (state) state.textContent = "live updates paused (" + err.message + ")";
    }
    nextRefresh = Math.max(REFRESH_MS, 10 * (performance.now() - started));
  }

  function scheduleRefresh() {
    setTimeout(async () => { await refreshLive(); scheduleRefresh(); }, nextRefresh);
  }

  // -- charts: SVG polylines from /api/series ----------------------------------------------
  function fmt(v, unit) {
    if (v === null || v === undefined || isNaN(v)) return "–";
    const abs = Math.abs(v);
    let s;
    if (unit === "B/s") {
      const units = ["B", "KiB", "MiB", "GiB"]; let i = 0; let x = abs;
      while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
      s = (i ? x.toFixed(1) : x.toFixed(0)) + " " + units[i] + "/s";
      return s;
    }
    if (abs >= 1e6) s = (v / 1e6).toFixed(1) + "M"; else if (abs >= 1e3) s = (v / 1e3).toFixed(1) + "k";
    else s = abs < 10 && abs % 1 ? v.toFixed(1) : v.toFixed(0);
    return s + (unit ? " " + unit : "");
  }

  async function drawChart(fig) {
    const keys = fig.dataset.keys.split(",");
    const unit = fig.dataset.unit || "";
    const url = fig.dataset.series + (fig.dataset.series.includes("?") ? "&" : "?") + "keys=" + keys.join(",");
    let data;
    try {
      const resp = await fetch(url, { cache: "no-store" });
      data = await resp.json();
    } catch (err) { return; }
    const svg = fig.querySelector("svg");
    const W = 600, H = 160, pad = 4;
    let tmin = Infinity, tmax = -Infinity, vmax = 0;
    keys.forEach((k) => {
      const s = data[k]; if (!s) return;
      s.t.forEach((t) => { tmin = Math.min(tmin, t); tmax = Math.max(tmax, t); });
      s.v.forEach((v) => { vmax = Math.max(vmax, v); });
    });
    const parts = [];
    for (let i = 1; i < 4; i++) {
      const y = pad + (H - 2 * pad) * i / 4;
      parts.push(`<line x1="0" x2="${W}" y1="${y}" y2="${y}" stroke="#e5e8ec" stroke-width="1"/>`);
    }
    const now = [];
    keys.forEach((k, i) => {
      const s = data[k];
      if (!s || !s.t.length) { now.push(k + " –"); return; }
      const span = Math.max(1, tmax - tmin), top = vmax > 0 ? vmax * 1.1 : 1;
      const pts = s.t.map((t, j) => {
        const x = ((t - tmin) / span) * W;
        const y = H - pad - (s.v[j] / top) * (H - 2 * pad);
        return x.toFixed(1) + "," + y.toFixed(1);
      });
      parts.push(`<polyline fill="none" stroke="${COLORS[i % COLORS.length]}" stroke-width="2" vector-effect="non-scaling-stroke" points="${pts.join(" ")}"/>`);
      now.push(k.replace("_", " ") + " " + fmt(s.v[s.v.length - 1], unit));
    });
    svg.innerHTML = parts.join("");
    fig.querySelector(".chart-now").textContent = now.join(" · ") + (vmax > 0 ? " (max " + fmt(vmax, unit) + ")" : "");
    fig.querySelector(".chart-legend").innerHTML = keys.map((k, i) =>
      `<span><i style="background:${COLORS[i % COLORS.length]}"></i>${k.replace("_", " ")}</span>`).join("");
  }

  function drawCharts() {
    if (!visible()) return;
    document.querySelectorAll("figure.chart[data-series]").forEach(drawChart);
  }

  // -- instant client-side filter for search boxes (the server filters with ?q= too) ----------
  function applyFilters() {
    document.querySelectorAll("input[data-filter]").forEach((input) => {
      const table = document.querySelector(input.dataset.filter);
      if (!table) return;
      const needle = input.value.trim().toLowerCase();
      table.querySelectorAll("tbody tr[data-name]").forEach((row) => {
        row.hidden = needle !== "" && !row.dataset.name.toLowerCase().includes(needle);
      });
    });
  }

  function setupFilters() {
    document.querySelectorAll("input[data-filter]").forEach((input) => {
      input.addEventListener("input", () => {
        applyFilters();
        const url = new URL(location.href);
        if (input.value) url.searchParams.set("q", input.value); else url.searchParams.delete("q");
        history.replaceState(null, "", url);
      });
    });
  }

  // -- keyboard: "/" focuses the search box, "g o|t|g" go to a page -----------------------------
  let pendingG = false;
  document.addEventListener("keydown", (ev) => {
    const tag = (ev.target.tagName || "").toLowerCase();
    if (["input", "textarea", "select"].includes(tag) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") {
      const box = document.querySelector("input[type=search]");
      if (box) { ev.preventDefault(); box.focus(); box.select(); }
    } else if (pendingG) {
      pendingG = false;
      const target = { o: "/", t: "/topics", g: "/groups" }[ev.key];
      if (target) location.href = target;
    } else if (ev.key === "g") {
      pendingG = true; setTimeout(() => { pendingG = false; }, 1000);
    }
  });

  // The typed topic name must match before the delete button works (the server checks too).
  function setupConfirm() {
    const form = document.getElementById("delete-form");
    if (!form) return;
    const name = document.getElementById("topic-name").textContent;
    const input = form.querySelector("#confirm");
    const button = form.querySelector("button");
    const sync = () => { button.disabled = input.value !== name; };
    input.addEventListener("input", sync); sync();
  }

  document.addEventListener("DOMContentLoaded", () => {
    setupFilters(); applyFilters(); setupConfirm(); drawCharts();
    scheduleRefresh();
    setInterval(drawCharts, 2000);
    document.addEventListener("visibilitychange", () => { if (visible()) { drawCharts(); refreshLive(); } });
  });
})();
