// asgrad graph viewer: layered layout (elkjs), folding module scopes, inspector,
// search, input tracing, gradient highlighting, before/after passes, profile colours.
// page.py wraps this file and ui.js in one function: they share these names.
  const DATA = JSON.parse(document.getElementById("asgrad-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const ROLE_COLOUR = { forward: "#4e79a7", gradient: "#e8772e", optimizer: "#3f9b4a" };
  const LEAF_COLOUR = { input: "#6b6b6b", parameter: "#8e5ea2", constant: "#a9a9a9" };
  // "kept" is not a role colour: in this mode blue would read as "forward"
  const STATUS_COLOUR = { kept: "#8a9a8c", dead: "#d62728", replaced: "#e5b80b", new: "#17becf" };
  const FOLD_ABOVE = 150; // graphs with more nodes start with their scopes folded
  const api = { ready: false, errors: [], layoutMs: {}, engine: {}, panes: [] };
  window.asgradViewer = api;
  const $ = (id) => document.getElementById(id);
  const elk = new ELK();
  let colourMode = "role";
  let selected = null; // node name, or "s:" + scope path
  let traced = new Set();

  // ---- the model of one view ------------------------------------------------------
  function prepare(view) {
    const nodes = view.nodes;
    const byName = new Map();
    nodes.forEach((n, i) => { n.i = i; n.consumers = []; byName.set(n.name, n); });
    nodes.forEach((n) => n.inputs.forEach((j) => nodes[j].consumers.push(n.i)));
    const scopes = new Map(); // path -> {path, name, parent, kids: Set, nodes: [], count, roles}
    const scopeOf = (path) => {
      if (scopes.has(path)) return scopes.get(path);
      const dot = path.lastIndexOf(".");
      const parent = path === "" ? null : (dot < 0 ? "" : path.slice(0, dot));
      const s = { path, name: path.slice(dot + 1), parent, kids: new Set(), nodes: [], count: 0, roles: {} };
      scopes.set(path, s);
      if (parent !== null) scopeOf(parent).kids.add(path);
      return s;
    };
    scopeOf("");
    nodes.forEach((n) => {
      const s = scopeOf(n.scope);
      s.nodes.push(n.i);
      for (let p = s; p; p = p.parent === null ? null : scopes.get(p.parent)) {
        p.count += 1; p.roles[n.role] = (p.roles[n.role] || 0) + 1;
        p.time = (p.time || 0) + (n.time || 0); p.bytes = (p.bytes || 0) + (n.bytes || 0);
      }
    });
    scopes.forEach((s) => {
      s.role = Object.entries(s.roles).sort((a, b) => b[1] - a[1])[0]?.[0] || "forward";
    });
    const gradOf = new Map(); // forward node name -> gradient node indices
    nodes.forEach((n) => {
      const targets = [n.grad_of, ...(n.grad_wrt || [])].filter(Boolean);
      targets.forEach((t) => { if (!gradOf.has(t)) gradOf.set(t, []); gradOf.get(t).push(n.i); });
    });
    const times = nodes.map((n) => n.time).filter((t) => t > 0);
    const bytes = nodes.map((n) => n.bytes).filter((b) => b > 0);
    view.maxTime = Math.max(1e-12, ...times); view.minTime = Math.min(view.maxTime, ...times);
    view.maxBytes = Math.max(1, ...bytes);
    const inner = [...scopes.values()].filter((sc) => sc.path !== "");
    view.maxScopeTime = Math.max(view.maxTime, ...inner.map((sc) => sc.time));
    view.maxScopeBytes = Math.max(view.maxBytes, ...inner.map((sc) => sc.bytes));
    Object.assign(view, { byName, scopes, gradOf });
    return view;
  }

  // ---- one pane: an svg showing one view ----------------------------------------------
  function Pane(view, key, title) {
    const el = document.createElement("div");
    el.className = "pane";
    el.innerHTML = `<div class="pane-title">${title}</div>`;
    const svg = document.createElementNS(NS, "svg");
    svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#889"/></marker></defs><g class="scene"></g>';
    el.appendChild(svg);
    const mini = document.createElement("canvas");
    mini.className = "minimap"; mini.width = 180; mini.height = 120;
    el.appendChild(mini);
    $("panes").appendChild(el);
    const pane = { view, key, el, svg, scene: svg.querySelector(".scene"), mini, t: { x: 20, y: 20, k: 1 },
      expanded: new Set([""]), boxes: [], bounds: { w: 1, h: 1 }, items: new Map() };
    if (view.nodes.length <= FOLD_ABOVE) view.scopes.forEach((_, p) => pane.expanded.add(p));
    panZoom(pane);
    return pane;
  }

  function repOf(pane, n) { // the visible item standing for node n
    if (n.scope === "") return "n:" + n.i;
    let path = "";
    for (const part of n.scope.split(".")) {
      path = path ? path + "." + part : part;
      if (!pane.expanded.has(path)) return "s:" + path;
    }
    return "n:" + n.i;
  }

  // A leaf read by several nodes (a parameter: by its layer, its gradient and its
  // optimizer update) is drawn as ports, a dot on each reader, not as long edges.
  const PORT_OPS = new Set(["parameter", "constant", "input"]);
  const isPort = (n) => PORT_OPS.has(n.op) && n.consumers.length >= 2;

  const typeText = (n) => `${n.dtype}[${n.shape.join(",")}]`;
  const textWidth = (s, px) => Math.ceil(s.length * px * 0.62) + 12;

  function elkGraph(pane) {
    const view = pane.view;
    const build = (path) => {
      const s = view.scopes.get(path);
      const kids = [];
      for (const c of s.kids) {
        const cs = view.scopes.get(c);
        const label = `\u229e ${cs.name} (${cs.count})`;
        if (pane.expanded.has(c)) {
          kids.push({ id: "s:" + c, children: build(c),
            layoutOptions: { "elk.padding": "[top=22,left=8,bottom=8,right=8]" } });
        } else {
          kids.push({ id: "s:" + c, width: Math.max(90, textWidth(label, 11)), height: 36 });
        }
      }
      for (const i of s.nodes) {
        const n = view.nodes[i];
        kids.push({ id: "n:" + i, width: Math.max(70, textWidth(n.op, 10) + 12, textWidth(n.io || n.name, 8)), height: 30 });
      }
      return kids;
    };
    const edges = new Map();
    pane.ports = new Map(); // item id -> indices of the port nodes it reads
    for (const n of view.nodes) {
      const b = repOf(pane, n);
      for (const j of n.inputs) {
        const a = repOf(pane, view.nodes[j]);
        if (a === b) continue;
        if (isPort(view.nodes[j])) {
          if (!pane.ports.has(b)) pane.ports.set(b, new Set());
          pane.ports.get(b).add(j);
          continue;
        }
        const id = a + ">" + b;
        if (!edges.has(id)) edges.set(id, { id, sources: [a], targets: [b], count: 0, text: typeText(view.nodes[j]) });
        edges.get(id).count += 1;
      }
    }
    // Labels are placed by render() (ELK's label placement doubles the layout time).
    const list = [...edges.values()].map((e) => ({ id: e.id, sources: e.sources, targets: e.targets,
      text: e.count > 1 ? `${e.count} values` : e.text }));
    return {
      id: "root", children: build(""), edges: list,
      layoutOptions: {
        "elk.algorithm": "layered", "elk.direction": "DOWN",
        "elk.hierarchyHandling": "INCLUDE_CHILDREN", "elk.json.edgeCoords": "ROOT", "elk.json.shapeCoords": "ROOT",
        "elk.layered.spacing.nodeNodeBetweenLayers": "30", "elk.spacing.nodeNode": "14",
        // measured fastest of the legible settings (docs/viewer.md): BRANDES_KOEPF
        // placement and one sweep are several times faster than NETWORK_SIMPLEX
        "elk.layered.thoroughness": "1", "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
      },
    };
  }

  async function layout(pane) {
    const started = performance.now();
    $("status").textContent = "laying out " + pane.view.label + " ...";
    const graph = elkGraph(pane);
    pane.engine = countItems(graph) > ELK_MAX_ITEMS ? "fast" : "elk";
    const result = pane.engine === "fast" ? fastLayout(graph) : await elk.layout(graph);
    pane.layoutMs = performance.now() - started;
    api.layoutMs[pane.key] = pane.layoutMs;
    api.engine[pane.key] = pane.engine;
    render(pane, result, graph);
    status();
  }

  function status() {
    const parts = api.panes.map((p) => `${p.view.label}: ${p.view.nodes.length} nodes, ${p.items.size} shown, layout ${Math.round(p.layoutMs || 0)} ms (${p.engine === "fast" ? "fast layout" : "elkjs"})`);
    const prof = DATA.profile ? ` | profile (${DATA.profile.backend}): step ${(DATA.profile.total * 1e3).toFixed(2)} ms` : "";
    $("status").textContent = parts.join(" | ") + prof;
  }

  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function render(pane, result, graph) {
    const view = pane.view;
    const scene = pane.scene;
    scene.textContent = "";
    pane.items = new Map(); pane.boxes = [];
    const edgeLayer = el("g", { class: "edges" });
    const walk = (node) => {
      for (const c of node.children || []) {
        const [kind, rest] = [c.id.slice(0, 1), c.id.slice(2)];
        const g = el("g", { "data-id": c.id, transform: `translate(${c.x},${c.y})` }, scene);
        el("rect", { width: c.width, height: c.height }, g);
        pane.items.set(c.id, { g, x: c.x, y: c.y, w: c.width, h: c.height });
        pane.boxes.push([c.x, c.y, c.width, c.height, c.id]);
        if (kind === "s") {
          const s = view.scopes.get(rest);
          const folded = !pane.expanded.has(rest);
          g.setAttribute("class", `scope role-${s.role}` + (folded ? " folded" : ""));
          const y = folded ? 22 : 15;
          const sign = el("text", { x: 5, y, class: "toggle" }, g);
          sign.textContent = folded ? "\u229e" : "\u229f"; // fold / unfold
          sign.addEventListener("click", (ev) => { ev.stopPropagation(); toggle(pane, rest); });
          const head = el("text", { x: 20, y, class: "head" }, g);
          head.textContent = folded ? `${s.name} (${s.count})` : s.name;
          head.addEventListener("click", (ev) => { ev.stopPropagation(); select(c.id); });
          if (folded) g.addEventListener("click", (ev) => { ev.stopPropagation(); select(c.id); });
          if (folded) g.addEventListener("dblclick", (ev) => { ev.stopPropagation(); toggle(pane, rest); });
          walk(c);
        } else {
          const n = view.nodes[+rest];
          g.setAttribute("class", "node" + (n.outputs ? " body-out" : "") + (n.body !== undefined ? " loop" : ""));
          el("text", { x: 5, y: 13 }, g).textContent = n.body !== undefined ? `${n.op} \u21aa` : n.op;
          el("text", { x: 5, y: 24, class: "sub" }, g).textContent = n.io || n.name;
          if (n.outputs) el("text", { x: 2, y: c.height + 9, class: "io-out" }, g).textContent = "\u2192 " + n.outputs.join(", ");
          g.addEventListener("click", (ev) => { ev.stopPropagation(); select(n.name); });
          if (n.body !== undefined) g.addEventListener("dblclick", (ev) => { ev.stopPropagation(); openBody(n.body); });
        }
      }
    };
    walk(result);
    drawPorts(pane);
    scene.appendChild(edgeLayer);
    const texts = new Map((graph.edges || []).map((e) => [e.id, e.text]));
    for (const e of result.edges || []) {
      for (const s of e.sections || []) {
        const pts = [s.startPoint, ...(s.bendPoints || []), s.endPoint];
        el("path", { class: "edge", d: "M" + pts.map((p) => `${p.x},${p.y}`).join("L") }, edgeLayer);
        const end = pts[pts.length - 1];
        el("text", { class: "edge-label", x: end.x + 3, y: end.y - 5 }, edgeLayer).textContent = texts.get(e.id) || "";
      }
    }
    pane.bounds = { w: result.width || 1, h: result.height || 1 };
    paint(pane);
  }

  function drawPorts(pane) {
    const view = pane.view;
    const MAX = 8;
    pane.ports.forEach((sources, id) => {
      const item = pane.items.get(id);
      if (!item) return;
      const list = [...sources];
      list.slice(0, MAX).forEach((j, k) => {
        const src = view.nodes[j];
        const dot = el("circle", { class: "port", cx: item.w - 6 - 9 * k, cy: 0, r: 3.5, fill: LEAF_COLOUR[src.op] || "#999" }, item.g);
        el("title", {}, dot).textContent = `${src.name}: ${typeText(src)} (${src.op})`;
        dot.addEventListener("click", (ev) => { ev.stopPropagation(); focus(src.name); });
      });
      if (list.length > MAX) {
        el("text", { class: "port-more", x: item.w - 10 - 9 * MAX, y: 3 }, item.g).textContent = `+${list.length - MAX}`;
      }
    });
  }

  // ---- colours and highlights -------------------------------------------------------
  function heat(f) { // 0..1 -> pale yellow .. dark red
    const h = 55 - 55 * f, l = 85 - 50 * f;
    return `hsl(${h},90%,${l}%)`;
  }
  function hash(s) { let h = 0; for (const c of s) h = (h * 31 + c.charCodeAt(0)) | 0; return Math.abs(h); }

  function profileFill(view, time, bytes, folded) { // a node, or a folded scope's sum
    const v = colourMode === "profile" ? time : bytes;
    if (!(v > 0)) return "#d0d0d0";
    const top = colourMode === "profile" ? (folded ? view.maxScopeTime : view.maxTime) : (folded ? view.maxScopeBytes : view.maxBytes);
    const f = colourMode === "profile"
      ? Math.log(v / view.minTime) / Math.log(Math.max(top / view.minTime, 1.0001))
      : Math.sqrt(v / top);
    return heat(Math.min(1, Math.max(0, f)));
  }

  function fill(view, n) {
    if (colourMode === "profile" || colourMode === "memory") return profileFill(view, n.time, n.bytes, false);
    if (colourMode === "fusion") return n.fusion ? `hsl(${hash(n.fusion) % 360},60%,50%)` : "#c8c8c8";
    if (colourMode === "status") return STATUS_COLOUR[n.status] || "#999";
    return LEAF_COLOUR[n.op] || ROLE_COLOUR[n.role] || ROLE_COLOUR.forward;
  }

  // The legend says what the colours of the current mode mean: the roles, a time or
  // memory scale (the profile's smallest and largest values shown), the fusion groups,
  // or what the passes did.
  function legend() {
    const swatch = (c, text) => `<span style="background:${c}"></span>${esc(text)} `;
    const views = api.panes.map((p) => p.view);
    let html;
    if (colourMode === "profile" || colourMode === "memory") {
      const stops = [0, 0.25, 0.5, 0.75, 1].map((f) => `${heat(f)} ${f * 100}%`).join(",");
      const bar = `<span class="bar" style="background:linear-gradient(to right,${stops})"></span>`;
      if (colourMode === "profile") {
        const lo = Math.min(...views.map((v) => v.minTime)), hi = Math.max(...views.map((v) => v.maxTime));
        html = `time per node (log scale) ${esc(timeText(lo))} ${bar} ${esc(timeText(hi))}`;
      } else {
        const hi = Math.max(...views.map((v) => v.maxBytes));
        html = `result size (square-root scale) 0 ${bar} ${esc(bytesText(hi))}`;
      }
      html += " " + swatch("#d0d0d0", "not profiled") + " <small>(a folded scope: its nodes summed)</small>";
    } else if (colourMode === "fusion") {
      const groups = new Set(views.flatMap((v) => v.nodes.map((n) => n.fusion).filter(Boolean)));
      html = `${groups.size} GPU fusion groups, a colour each` + swatch("#c8c8c8", "not fused");
    } else if (colourMode === "status") {
      html = Object.entries(STATUS_COLOUR).map(([k, c]) => swatch(c, k)).join("");
    } else {
      html = Object.entries({ ...ROLE_COLOUR, ...LEAF_COLOUR }).map(([k, c]) => swatch(c, k)).join("")
        + ' <small>\u25cf a port: a leaf read by several nodes</small>';
    }
    $("legend").innerHTML = html;
    $("legend").dataset.mode = colourMode;
  }

  function timeText(s) { return s >= 1e-3 ? `${(s * 1e3).toFixed(2)} ms` : `${(s * 1e6).toFixed(1)} \u00b5s`; }
  function bytesText(b) { return b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB` : `${(b / 1024).toFixed(1)} KiB`; }

  function related(view) { // gradient <-> forward partners of the selection
    const out = new Set();
    if (!selected || selected.startsWith("s:")) return out;
    const n = view.byName.get(selected);
    if (!n) return out;
    (view.gradOf.get(n.name) || []).forEach((i) => out.add(i));
    [n.grad_of, ...(n.grad_wrt || [])].forEach((name) => { const m = view.byName.get(name); if (m) out.add(m.i); });
    return out;
  }

  function paint(pane) {
    const view = pane.view;
    pane.svg.classList.toggle("heat", colourMode === "profile" || colourMode === "memory");
    const rel = related(view);
    const mark = new Map(); // item id -> classes
    const add = (id, cls) => { if (!mark.has(id)) mark.set(id, new Set()); mark.get(id).add(cls); };
    rel.forEach((i) => add(repOf(pane, view.nodes[i]), "related"));
    traced.forEach((name) => { const n = view.byName.get(name); if (n) add(repOf(pane, n), "traced"); });
    if (selected) {
      const n = view.byName.get(selected);
      add(n ? repOf(pane, n) : selected, "selected");
    }
    pane.items.forEach((item, id) => {
      const g = item.g;
      ["selected", "related", "traced", "dead", "replaced"].forEach((c) => g.classList.remove(c));
      (mark.get(id) || []).forEach((c) => g.classList.add(c));
      if (id.startsWith("s:") && !pane.expanded.has(id.slice(2))) {
        const sc = view.scopes.get(id.slice(2));
        const heatMode = colourMode === "profile" || colourMode === "memory";
        g.firstChild.style.fill = heatMode ? profileFill(view, sc.time, sc.bytes, true) : "";
        g.classList.toggle("hot", heatMode && sc[colourMode === "profile" ? "time" : "bytes"] > 0);
      } else if (id.startsWith("n:")) {
        const n = view.nodes[+id.slice(2)];
        g.firstChild.style.fill = fill(view, n);
        if (n.status === "dead" || n.status === "replaced") g.classList.add(n.status);
      }
    });
    drawMini(pane);
  }

  function paintAll() { api.panes.forEach(paint); }

  // ---- folding, selection, search, tracing ------------------------------------------------
  async function toggle(pane, path) {
    if (pane.expanded.has(path)) {
      pane.expanded.forEach((p) => { if (p === path || p.startsWith(path + ".")) pane.expanded.delete(p); });
    } else {
      pane.expanded.add(path);
    }
    await layout(pane);
  }

  function reveal(pane, n) {
    let changed = false, path = "";
    for (const part of n.scope ? n.scope.split(".") : []) {
      path = path ? path + "." + part : part;
      if (!pane.expanded.has(path)) { pane.expanded.add(path); changed = true; }
    }
    return changed;
  }

  async function focus(name) {
    for (const pane of api.panes) {
      const n = pane.view.byName.get(name);
      if (n && reveal(pane, n)) await layout(pane);
    }
    select(name);
    api.panes.forEach((pane) => {
      const n = pane.view.byName.get(name);
      const item = n && pane.items.get(repOf(pane, n));
      if (item) centre(pane, item.x + item.w / 2, item.y + item.h / 2, Math.max(pane.t.k, 0.8));
    });
  }

  function select(id) {
    selected = id;
    paintAll();
    inspect();
  }

  function trace() {
    traced = new Set();
    const pane = api.panes[0];
    const n = selected && pane.view.byName.get(selected);
    if (!n) return;
    const stack = [n.i];
    while (stack.length) {
      const m = pane.view.nodes[stack.pop()];
      if (traced.has(m.name)) continue;
      traced.add(m.name);
      m.inputs.forEach((j) => stack.push(j));
    }
    paintAll();
    inspect();
  }

  function search(query) {
    const q = query.trim().toLowerCase();
    const view = api.panes[0].view;
    if (!q) return [];
    return view.nodes.filter((n) => n.name.toLowerCase().includes(q) || n.op.toLowerCase() === q
      || n.scope.toLowerCase().includes(q)).slice(0, 200).map((n) => n.name);
  }
