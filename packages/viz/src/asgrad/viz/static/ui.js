  // ---- pan, zoom, fit, minimap (ui.js; shares viewer.js's names) -------------------------
  function apply(pane) {
    const t = pane.t;
    pane.scene.setAttribute("transform", `translate(${t.x},${t.y}) scale(${t.k})`);
    pane.svg.classList.toggle("far", t.k < 0.45);
    drawMini(pane);
  }

  function panZoom(pane) {
    const svg = pane.svg;
    let drag = null;
    svg.addEventListener("mousedown", (ev) => {
      drag = { x: ev.clientX, y: ev.clientY, tx: pane.t.x, ty: pane.t.y, moved: false };
      svg.classList.add("dragging");
    });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      pane.t.x = drag.tx + ev.clientX - drag.x; pane.t.y = drag.ty + ev.clientY - drag.y;
      drag.moved = true; apply(pane);
    });
    window.addEventListener("mouseup", () => { drag = null; svg.classList.remove("dragging"); });
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = svg.getBoundingClientRect();
      const f = Math.exp(-ev.deltaY * 0.0015);
      zoomAt(pane, ev.clientX - r.left, ev.clientY - r.top, f);
    }, { passive: false });
    svg.addEventListener("click", () => { if (!drag || !drag.moved) { /* background click keeps selection */ } });
    pane.mini.addEventListener("click", (ev) => {
      const r = pane.mini.getBoundingClientRect();
      const s = miniScale(pane);
      centre(pane, (ev.clientX - r.left) / s, (ev.clientY - r.top) / s, pane.t.k);
    });
  }

  function zoomAt(pane, px, py, f) {
    const t = pane.t;
    const k = Math.min(4, Math.max(0.02, t.k * f));
    t.x = px - (px - t.x) * (k / t.k); t.y = py - (py - t.y) * (k / t.k); t.k = k;
    apply(pane);
  }

  function centre(pane, x, y, k) {
    const r = pane.svg.getBoundingClientRect();
    pane.t = { k, x: r.width / 2 - x * k, y: r.height / 2 - y * k };
    apply(pane);
  }

  function fit(pane) {
    const r = pane.svg.getBoundingClientRect();
    const b = pane.bounds;
    const k = Math.min(2, Math.max(0.02, Math.min((r.width - 40) / b.w, (r.height - 40) / b.h)));
    pane.t = { k, x: (r.width - b.w * k) / 2, y: Math.max(10, (r.height - b.h * k) / 2) };
    apply(pane);
  }

  function miniScale(pane) { return Math.min(pane.mini.width / pane.bounds.w, pane.mini.height / pane.bounds.h); }

  function drawMini(pane) {
    const c = pane.mini.getContext("2d");
    const s = miniScale(pane);
    c.clearRect(0, 0, pane.mini.width, pane.mini.height);
    for (const [x, y, w, h, id] of pane.boxes) {
      if (id.startsWith("n:")) {
        c.fillStyle = pane.items.get(id).g.firstChild.style.fill || "#888";
        c.fillRect(x * s, y * s, Math.max(1, w * s), Math.max(1, h * s));
      } else {
        c.strokeStyle = "#8896b0"; c.strokeRect(x * s, y * s, w * s, h * s);
      }
    }
    const r = pane.svg.getBoundingClientRect();
    const t = pane.t;
    c.strokeStyle = "#e0197d"; c.lineWidth = 1.5;
    c.strokeRect(-t.x / t.k * s, -t.y / t.k * s, r.width / t.k * s, r.height / t.k * s);
  }

  // ---- the inspector ---------------------------------------------------------------------
  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
  const link = (name, text) => `<span class="link" data-name="${esc(name)}">${esc(text || name)}</span>`;

  function inspect() {
    const box = $("inspector");
    const pane = api.panes[0];
    const view = pane.view;
    if (!selected) { box.innerHTML = "<p>Click a node or a scope.</p>"; return; }
    if (selected.startsWith("s:")) {
      const s = view.scopes.get(selected.slice(2));
      const ops = {};
      const walk = (sc) => { sc.nodes.forEach((i) => { const o = view.nodes[i].op; ops[o] = (ops[o] || 0) + 1; }); sc.kids.forEach((k) => walk(view.scopes.get(k))); };
      walk(s);
      const top = Object.entries(ops).sort((a, b) => b[1] - a[1]).slice(0, 12).map(([o, c]) => `${esc(o)} \u00d7${c}`).join(", ");
      box.innerHTML = `<h2>scope ${esc(s.path)}</h2><table><tr><td>nodes</td><td>${s.count}</td></tr>`
        + `<tr><td>role</td><td>${esc(s.role)}</td></tr><tr><td>ops</td><td>${top}</td></tr>`
        + (s.time > 0 ? `<tr><td>time</td><td>${(s.time * 1e3).toFixed(3)} ms (profile, its nodes summed)</td></tr>` : "")
        + "</table>"
        + `<p><button id="unfold-scope">Unfold</button></p>`;
      $("unfold-scope").onclick = () => { api.panes.forEach((p) => { if (!p.expanded.has(s.path)) toggle(p, s.path); }); };
      return;
    }
    const n = view.byName.get(selected);
    if (!n) { box.innerHTML = `<h2>${esc(selected)}</h2><p>not in this view</p>`; return; }
    const rows = [["op", esc(n.op)], ["output", esc(typeText(n))], ["role", esc(n.role)],
      ["module", esc((n.module ?? n.scope) || "(top level)")]];
    if (n.defined) rows.push(["defined at", esc(n.defined)], ["first used at", esc(n.loc)]);
    else rows.push(["source", esc(n.loc)]);
    if (n.status) rows.push(["passes", esc(n.status)]);
    if (n.fusion) rows.push(["fusion group", esc(n.fusion)]);
    if (n.time !== undefined) rows.push(["time", `${(n.time * 1e6).toFixed(1)} \u00b5s`]);
    if (n.bytes !== undefined) rows.push(["memory", `${(n.bytes / 1024).toFixed(1)} KiB`]);
    for (const [k, v] of Object.entries(n.attrs)) rows.push(["attr " + esc(k), esc(v)]);
    const loop = n.body !== undefined ? DATA.bodies[n.body] : null;
    const inputRole = (k) => { // which carry, xs or captured value of the loop an input is
      if (!loop) return "";
      const at = k - (n.inputs.length - (loop.carries + loop.xs + loop.captures.length));
      if (at < 0) return "packed result: ";
      if (at < loop.carries) return `carry ${at}: `;
      if (at < loop.carries + loop.xs) return `xs ${at - loop.carries}: `;
      return "captured: ";
    };
    const ins = n.inputs.map((j, k) => { const m = view.nodes[j]; return `${esc(inputRole(k))}${link(m.name)}: ${esc(typeText(m))}`; });
    if (loop) {
      rows.push(["loop body", `<button id="open-body">Open loop body</button> ${esc(loop.body)}: ${loop.nodes.length} nodes,`
        + ` ${loop.carries} carries, ${loop.xs} xs, ${loop.ys} ys, ${loop.captures.length} captured (defined at ${esc(loop.where)})`]);
    }
    if (n.op === "scan") {
      rows.push(["packed", "one vector of the final carries, each ys stacked by step and (save) the"
        + " carries each step started from; its scan_part nodes take it apart"]);
    }
    if (n.io) rows.push(["in the loop", esc(n.io)]);
    if (n.outputs) rows.push(["loop output", esc(n.outputs.join(", "))]);
    const outs = n.consumers.map((j) => link(view.nodes[j].name));
    rows.push(["inputs", ins.join("<br>") || "none"]);
    rows.push(["consumers", outs.join("<br>") || "none"]);
    if (n.grad_of) rows.push(["gradient of", link(n.grad_of)]);
    if (n.grad_wrt) rows.push(["gradient wrt", n.grad_wrt.map((w) => link(w)).join(", ")]);
    const grads = view.gradOf.get(n.name) || [];
    if (grads.length) rows.push(["gradient nodes", grads.slice(0, 40).map((i) => link(view.nodes[i].name)).join(", ") + (grads.length > 40 ? ` ... (${grads.length})` : "")]);
    if (traced.has(n.name)) {
      const leaves = [...traced].map((t) => view.byName.get(t)).filter((m) => m && (m.op === "input" || m.op === "parameter"));
      rows.push(["traced to", leaves.map((m) => link(m.name)).join(", ") || "constants only"]);
    }
    box.innerHTML = `<h2>${esc(n.name)}</h2><table>` + rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join("") + "</table>";
    box.querySelectorAll(".link").forEach((e) => { e.onclick = () => focus(e.dataset.name); });
    if (loop) $("open-body").onclick = () => openBody(n.body);
  }

  // ---- export -------------------------------------------------------------------------------
  // The drawing of every pane shown (before | after: side by side), whole, styles inlined.
  function svgText(panes) {
    const GAP = 30;
    const out = document.createElementNS(NS, "svg");
    out.setAttribute("xmlns", NS);
    const style = document.createElementNS(NS, "style");
    style.textContent = document.querySelector("style").textContent;
    out.appendChild(style);
    out.appendChild(panes[0].svg.querySelector("defs").cloneNode(true));
    let left = 10, height = 0;
    for (const pane of panes) {
      const b = pane.bounds;
      const g = document.createElementNS(NS, "g");
      g.setAttribute("transform", `translate(${left},10)`);
      if (panes.length > 1) {
        const title = document.createElementNS(NS, "text");
        title.setAttribute("class", "pane-label"); title.setAttribute("y", 12);
        title.textContent = pane.view.label;
        g.appendChild(title);
      }
      const scene = pane.scene.cloneNode(true);
      scene.setAttribute("transform", panes.length > 1 ? "translate(0,24)" : "");
      g.appendChild(scene);
      out.appendChild(g);
      left += b.w + GAP;
      height = Math.max(height, b.h + (panes.length > 1 ? 24 : 0));
    }
    const w = left - GAP + 10, h = height + 20;
    out.setAttribute("width", w); out.setAttribute("height", h);
    out.setAttribute("viewBox", `0 0 ${w} ${h}`);
    return new XMLSerializer().serializeToString(out);
  }

  function svgSize(panes) {
    const w = panes.reduce((s, p) => s + p.bounds.w, 0) + 30 * (panes.length - 1) + 20;
    const h = Math.max(...panes.map((p) => p.bounds.h)) + (panes.length > 1 ? 24 : 0) + 20;
    return { w, h };
  }

  function download(name, url) {
    const a = document.createElement("a");
    a.href = url; a.download = name; document.body.appendChild(a); a.click(); a.remove();
  }

  function pngURL(panes) {
    return new Promise((resolve, reject) => {
      const img = new Image();
      const b = svgSize(panes);
      const scale = Math.min(2, 16000 / Math.max(b.w, b.h));
      img.onload = () => {
        const c = document.createElement("canvas");
        c.width = Math.ceil(b.w * scale); c.height = Math.ceil(b.h * scale);
        const ctx = c.getContext("2d");
        ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
        ctx.drawImage(img, 0, 0, c.width, c.height);
        resolve(c.toDataURL("image/png"));
      };
      img.onerror = () => reject(new Error("the SVG could not be drawn"));
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText(panes));
    });
  }

  // ---- wiring -------------------------------------------------------------------------------
  async function showPanes(keys) {
    $("panes").textContent = "";
    api.panes = keys.map((k) => Pane(views[k], k, views[k].label));
    await Promise.all(api.panes.map(async (p) => { await layout(p); fit(p); }));
    paintAll(); inspect(); legend(); drawTrail();
  }

  async function showView(which) {
    trail = [];
    $("view").value = which;
    await showPanes(which === "both" ? ["before", "after"] : [which]);
  }

  // A loop body opens as a graph of its own; the trail above the graph leads back out.
  let trail = []; // the bodies opened, outermost first: {key, label}
  async function openBody(key) {
    const k = "body:" + key;
    if (!views[k]) views[k] = prepare(DATA.bodies[key]);
    const at = trail.findIndex((t) => t.key === key);
    trail = at >= 0 ? trail.slice(0, at + 1) : [...trail, { key, label: views[k].label }];
    selected = null; traced = new Set();
    await showPanes([k]);
  }

  function drawTrail() {
    const box = $("trail");
    if (!trail.length) { box.textContent = ""; box.style.display = "none"; return; }
    box.style.display = "";
    box.innerHTML = `<span class="link" data-k="">${esc(DATA.title)}</span>`
      + trail.map((t) => ` \u203a <span class="link" data-k="${esc(t.key)}">${esc(t.label)}</span>`).join("");
    box.querySelectorAll(".link").forEach((e) => {
      e.onclick = () => (e.dataset.k ? openBody(e.dataset.k) : showView($("view").value));
    });
  }

  const views = {};
  for (const k of Object.keys(DATA.views)) views[k] = prepare(DATA.views[k]);
  $("title").textContent = DATA.title;
  document.title = DATA.title + " - asgrad graph";
  $("view").onchange = (e) => showView(e.target.value);
  $("colour").onchange = (e) => { colourMode = e.target.value; paintAll(); legend(); };
  $("fit").onclick = () => api.panes.forEach(fit);
  $("expand").onclick = () => api.unfoldAll();
  $("collapse").onclick = async () => { for (const p of api.panes) { p.expanded = new Set([""]); await layout(p); fit(p); } };
  $("trace").onclick = trace;
  $("svg").onclick = () => download(DATA.title + ".svg", URL.createObjectURL(new Blob([svgText(api.panes)], { type: "image/svg+xml" })));
  $("png").onclick = async () => download(DATA.title + ".png", await pngURL(api.panes));
  const results = $("results");
  const showResults = () => {
    const found = search($("search").value);
    results.innerHTML = found.map((name) => { const n = api.panes[0].view.byName.get(name); return `<div data-name="${esc(name)}">${esc(name)} <small>${esc(n.op)} ${esc(n.scope)}</small></div>`; }).join("")
      || ($("search").value ? "<div>no match</div>" : "");
    results.style.display = results.innerHTML ? "block" : "none";
    results.querySelectorAll("div[data-name]").forEach((d) => { d.onclick = () => { results.style.display = "none"; focus(d.dataset.name); }; });
  };
  $("search").oninput = showResults;
  $("search").onkeydown = (e) => {
    if (e.key === "Enter") { const first = search($("search").value)[0]; results.style.display = "none"; if (first) focus(first); }
    if (e.key === "Escape") results.style.display = "none";
  };
  Object.assign(api, {
    focus, select, search, trace, fit: () => api.panes.forEach(fit), showView,
    fold: (path) => Promise.all(api.panes.filter((p) => p.expanded.has(path)).map((p) => toggle(p, path))),
    unfold: (path) => Promise.all(api.panes.filter((p) => !p.expanded.has(path)).map((p) => toggle(p, path))),
    setColour: (m) => { colourMode = m; $("colour").value = m; paintAll(); legend(); },
    svgText: () => svgText(api.panes), pngURL: () => pngURL(api.panes), openBody,
    unfoldAll: async () => { for (const p of api.panes) { p.view.scopes.forEach((_, k) => p.expanded.add(k)); await layout(p); fit(p); } },
    shown: () => [...api.panes[0].items.keys()],
    elkGraph: () => elkGraph(api.panes[0]), getSelected: () => selected,
  });
  if (!DATA.profile) { $("colour").querySelector('[value="profile"]').disabled = true; $("colour").querySelector('[value="memory"]').disabled = true; }
  if (!DATA.fusion) $("colour").querySelector('[value="fusion"]').disabled = true;
  showView("before").then(() => { api.ready = true; }, (err) => { api.errors.push(String(err)); console.error(err); $("status").textContent = "layout failed: " + err; });
