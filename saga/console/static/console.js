// saga console: progressive enhancement only. Every page works without this file;
// it keeps counts, queues and a running saga fresh through the JSON API, and
// adds "select all" to the dead letters. No inline script anywhere (strict CSP).
"use strict";
(function () {
  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(url + ": " + r.status);
    return r.json();
  }

  // Run fn every ms milliseconds while the tab is visible, one call at a time;
  // fn returns false to stop.
  function every(ms, fn) {
    let busy = false;
    const timer = setInterval(async function () {
      if (busy || document.hidden) return;
      busy = true;
      try {
        if ((await fn()) === false) clearInterval(timer);
      } catch (e) {
        /* the next tick tries again */
      } finally {
        busy = false;
      }
    }, ms);
  }

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = String(text);
    if (cls) td.className = cls;
    return td;
  }

  // Sagas: the counts per state.
  const counts = document.querySelectorAll("[data-count]");
  if (counts.length) {
    every(3000, async function () {
      const type = new URLSearchParams(location.search).get("type"); // the list's type filter
      const d = await getJSON("/api/v1/counts" + (type ? "?type=" + encodeURIComponent(type) : ""));
      counts.forEach(function (el) {
        const v = d.counts[el.dataset.count];
        if (v !== undefined) el.textContent = v;
      });
    });
  }

  // A saga: while it is not finished, redraw the page's live part when it changes.
  if (document.getElementById("live")) {
    every(1000, async function () {
      const live = document.getElementById("live");
      if (!live || live.dataset.live !== "1") return false;
      const d = await getJSON(live.dataset.poll);
      if (String(d.saga.updated_ms) === live.dataset.updated && d.saga.state === live.dataset.state) return true;
      const html = await (await fetch(location.pathname + location.search, { credentials: "same-origin" })).text();
      const fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
      if (fresh) live.replaceWith(document.importNode(fresh, true));
      return true;
    });
  }

  // Queues: the tables and the breakers, as saga top refreshes them.
  function rows(table, items, cells, empty) {
    const body = document.createElement("tbody");
    items.forEach(function (item) {
      const tr = document.createElement("tr");
      tr.append.apply(tr, cells(item));
      body.append(tr);
    });
    if (!items.length) {
      const tr = document.createElement("tr");
      const td = cell(empty, "empty");
      td.colSpan = table.tHead.rows[0].cells.length;
      tr.append(td);
      body.append(tr);
    }
    table.tBodies[0].replaceWith(body);
  }
  const queues = document.getElementById("queues");
  if (queues) {
    every(2000, async function () {
      const d = await getJSON("/api/v1/queues");
      rows(queues, d.steps, function (s) {
        return [cell(s.type), cell(s.step), cell(s.lag === null ? "?" : s.lag, "num"),
          cell(s.pending, "num"), cell(s.delayed, "num"), cell(s.parked, "num"), cell(s.deferred, "num"),
          cell(s.dead, s.dead ? "num bad" : "num"),
          cell(s.throughput === null ? "-" : s.throughput.toFixed(1), "num"), cell(s.workers, "num")];
      }, "no steps registered yet: start a worker or a saga first");
      rows(document.getElementById("workers"), d.workers, function (w) {
        const started = w.started_ms ? new Date(w.started_ms).toISOString().slice(0, 19).replace("T", " ") : "-";
        return [cell(w.worker, "worker"), cell(w.saga_type), cell(w.steps.join(", ")), cell(w.host),
          cell(w.pid, "num"), cell(w.health || "-", "worker"), cell(started, "time")];
      }, "no live worker: start one with saga worker");
      const breakers = document.getElementById("breakers");
      breakers.replaceChildren();
      Object.entries(d.breakers).forEach(function ([name, b]) {
        const li = document.createElement("li");
        li.className = "br-" + b.state;
        const n = document.createElement("b");
        n.textContent = name;
        li.append(n, " ", b.state + (b.failures ? " · " + b.failures + " failure(s)" : ""));
        breakers.append(li);
      });
      document.getElementById("queues-at").textContent = "updated " + new Date(d.at_ms).toLocaleTimeString();
    });
  }

  // Dead letters: one box selects them all.
  document.querySelectorAll("[data-select-all]").forEach(function (box) {
    box.addEventListener("change", function () {
      document.querySelectorAll('input[name="' + box.dataset.selectAll + '"]').forEach(function (b) {
        b.checked = box.checked;
      });
    });
  });
})();
