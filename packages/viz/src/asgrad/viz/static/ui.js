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
      ["module", esc((n.module ?? n.scope) || "(top level)")], ["source", esc(n.loc)]];
    if (n.status) rows.push(["passes", esc(n.status)]);
    if (n.fusion) rows.push(["fusion group", esc(n.fusion)]);
    if (n.time !== undefined) rows.push(["time", `${(n.time * 1e6).toFixed(1)} \u00b5s`]);
    if (n.bytes !== undefined) rows.push(["memory", `${(n.bytes / 1024).toFixed(1)} KiB`]);
    for (const [k, v] of Object.entries(n.attrs)) rows.push(["attr " + esc(k), esc(v)]);
    const ins = n.inputs.map((j) => { const m = view.nodes[j]; return `${link(m.name)}: ${esc(typeText(m))}`; });
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
  }

  // ---- export -------------------------------------------------------------------------------
  function svgText(pane) {
    const clone = pane.svg.cloneNode(true);
    const b = pane.bounds;
    clone.querySelector(".scene").setAttribute("transform", "translate(10,10)");
    clone.setAttribute("xmlns", NS);
    clone.setAttribute("width", b.w + 20); clone.setAttribute("height", b.h + 20);
    clone.setAttribute("viewBox", `0 0 ${b.w + 20} ${b.h + 20}`);
    clone.classList.remove("far", "dragging");
    const style = document.createElementNS(NS, "style");
    style.textContent = document.querySelector("style").textContent;
    clone.insertBefore(style, clone.firstChild);
    return new XMLSerializer().serializeToString(clone);
  }

  function download(name, url) {
    const a = document.createElement("a");
    a.href = url; a.download = name; document.body.appendChild(a); a.click(); a.remove();
  }

  function pngURL(pane) {
    return new Promise((resolve, reject) => {
      const img = new Image();
      const b = pane.bounds;
      const scale = Math.min(2, 16000 / Math.max(b.w + 20, b.h + 20));
      img.onload = () => {
        const c = document.createElement("canvas");
        c.width = Math.ceil((b.w + 20) * scale); c.height = Math.ceil((b.h + 20) * scale);
        const ctx = c.getContext("2d");
        ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, c.height);
        ctx.drawImage(img, 0, 0, c.width, c.height);
        resolve(c.toDataURL("image/png"));
      };
      img.onerror = () => reject(new Error("the SVG could not be drawn"));
      img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText(pane));
    });
  }

  // ---- wiring -------------------------------------------------------------------------------
  async function showView(which) {
    $("panes").textContent = "";
    const keys = which === "both" ? ["before", "after"] : [which];
    api.panes = keys.map((k) => Pane(views[k], k, views[k].label));
    await Promise.all(api.panes.map(async (p) => { await layout(p); fit(p); }));
    paintAll(); inspect();
  }

  const views = {};
  for (const k of Object.keys(DATA.views)) views[k] = prepare(DATA.views[k]);
  $("title").textContent = DATA.title;
  document.title = DATA.title + " - asgrad graph";
  $("legend").innerHTML = Object.entries({ ...ROLE_COLOUR, ...LEAF_COLOUR })
    .map(([k, c]) => `<span style="background:${c}"></span>${k}`).join("");
  $("view").onchange = (e) => showView(e.target.value);
  $("colour").onchange = (e) => { colourMode = e.target.value; paintAll(); };
  $("fit").onclick = () => api.panes.forEach(fit);
  $("expand").onclick = async () => { for (const p of api.panes) { p.view.scopes.forEach((_, k) => p.expanded.add(k)); await layout(p); fit(p); } };
  $("collapse").onclick = async () => { for (const p of api.panes) { p.expanded = new Set([""]); await layout(p); fit(p); } };
  $("trace").onclick = trace;
  $("svg").onclick = () => download(DATA.title + ".svg", URL.createObjectURL(new Blob([svgText(api.panes[0])], { type: "image/svg+xml" })));
  $("png").onclick = async () => download(DATA.title + ".png", await pngURL(api.panes[0]));
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
    setColour: (m) => { colourMode = m; $("colour").value = m; paintAll(); },
    svgText: () => svgText(api.panes[0]), pngURL: () => pngURL(api.panes[0]),
    shown: () => [...api.panes[0].items.keys()],
    elkGraph: () => elkGraph(api.panes[0]), getSelected: () => selected,
  });
  if (!DATA.profile) { $("colour").querySelector('[value="profile"]').disabled = true; $("colour").querySelector('[value="memory"]').disabled = true; }
  if (!DATA.fusion) $("colour").querySelector('[value="fusion"]').disabled = true;
  showView("before").then(() => { api.ready = true; }, (err) => { api.errors.push(String(err)); console.error(err); $("status").textContent = "layout failed: " + err; });
