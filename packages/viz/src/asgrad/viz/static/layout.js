  // ---- the fast layered layout (layout.js; shares viewer.js's names) -------------------------
  // elkjs needs seconds for a few hundred items (23 s for the 599 nodes of the transformer
  // step unfolded, docs/viewer.md); above ELK_MAX_ITEMS shown items the viewer lays out
  // with this simpler layered algorithm instead, in milliseconds: each unfolded scope is
  // laid out on its own, bottom up (its items in layers by longest path, ordered by a few
  // barycentre sweeps), and an edge between scopes is drawn from box to box.
  const ELK_MAX_ITEMS = 60;
  const GAP_X = 14, GAP_Y = 30, PAD = { top: 22, left: 8, bottom: 8, right: 8 };

  function countItems(graph) {
    let count = 0;
    const walk = (n) => { for (const c of n.children || []) { count += 1; walk(c); } };
    walk(graph);
    return count;
  }

  function fastLayout(graph) {
    const path = new Map(); // item id -> [top-level item, ..., item]
    const walk = (n, above) => {
      for (const c of n.children || []) {
        const chain = [...above, c];
        path.set(c.id, chain);
        walk(c, chain);
      }
    };
    walk(graph, []);
    const local = new Map(); // container id -> [[child id, child id], ...]
    for (const e of graph.edges || []) {
      const a = path.get(e.sources[0]), b = path.get(e.targets[0]);
      if (!a || !b) continue;
      let k = 0;
      while (k < a.length && k < b.length && a[k] === b[k]) k += 1;
      if (k >= a.length || k >= b.length) continue;
      const box = k === 0 ? graph.id : a[k - 1].id;
      if (!local.has(box)) local.set(box, []);
      local.get(box).push([a[k].id, b[k].id]);
    }
    const place = (n) => { // sizes n's children (recursively) and places them inside n
      const kids = n.children || [];
      kids.forEach((c) => { if (c.children && c.children.length) place(c); });
      const size = layers(kids, local.get(n.id) || []);
      if (n !== graph) {
        n.width = Math.max(n.width || 0, size.w + PAD.left + PAD.right, 80);
        n.height = size.h + PAD.top + PAD.bottom;
        kids.forEach((c) => { c.x += PAD.left; c.y += PAD.top; });
      } else {
        n.width = size.w; n.height = size.h;
      }
    };
    place(graph);
    const absolute = (n, dx, dy) => {
      for (const c of n.children || []) { c.x += dx; c.y += dy; absolute(c, c.x, c.y); }
    };
    absolute(graph, 0, 0);
    const boxes = new Map([...path.entries()].map(([id, chain]) => [id, chain[chain.length - 1]]));
    graph.edges = (graph.edges || []).map((e) => {
      const a = boxes.get(e.sources[0]), b = boxes.get(e.targets[0]);
      const start = { x: a.x + a.width / 2, y: a.y + a.height };
      const end = { x: b.x + b.width / 2, y: b.y };
      const bends = end.y > start.y
        ? [{ x: start.x, y: start.y + GAP_Y / 3 }, { x: end.x, y: end.y - GAP_Y / 3 }]
        : [{ x: start.x, y: start.y + GAP_Y / 3 }, { x: Math.max(a.x + a.width, b.x + b.width) + GAP_X, y: start.y + GAP_Y / 3 },
          { x: Math.max(a.x + a.width, b.x + b.width) + GAP_X, y: end.y - GAP_Y / 3 }, { x: end.x, y: end.y - GAP_Y / 3 }];
      return { ...e, sections: [{ startPoint: start, endPoint: end, bendPoints: bends }] };
    });
    return graph;
  }

  // Items in layers (longest path from the sources, cycles broken in model order), ordered
  // by barycentre sweeps, placed left to right; returns the size they take.
  function layers(kids, edges) {
    const n = kids.length;
    if (!n) return { w: 0, h: 0 };
    const at = new Map(kids.map((k, i) => [k.id, i]));
    const succ = kids.map(() => []), pred = kids.map(() => []);
    const seen = new Set();
    for (const [a, b] of edges) {
      const i = at.get(a), j = at.get(b), key = i * n + j;
      if (i === j || seen.has(key)) continue;
      seen.add(key); succ[i].push(j); pred[j].push(i);
    }
    // topological order (Kahn); on a cycle, the earliest remaining item goes next
    const waiting = pred.map((p) => p.length);
    const done = new Array(n).fill(false);
    const order = [];
    const ready = [];
    for (let i = n - 1; i >= 0; i--) if (!waiting[i]) ready.push(i);
    let next = 0;
    while (order.length < n) {
      let i;
      if (ready.length) i = ready.pop();
      else { while (done[next]) next += 1; i = next; }
      if (done[i]) continue;
      done[i] = true; order.push(i);
      for (const j of succ[i]) { waiting[j] -= 1; if (waiting[j] === 0 && !done[j]) ready.push(j); }
    }
    const rank = new Array(n).fill(0);
    const placed = new Array(n).fill(false);
    for (const i of order) {
      for (const p of pred[i]) if (placed[p]) rank[i] = Math.max(rank[i], rank[p] + 1);
      placed[i] = true;
    }
    const rows = [];
    for (const i of order) (rows[rank[i]] = rows[rank[i]] || []).push(i);
    const x = new Array(n).fill(0);
    const spread = (row) => { let left = 0; for (const i of row) { x[i] = left + kids[i].width / 2; left += kids[i].width + GAP_X; } };
    rows.forEach(spread);
    const centre = (row, near) => { // each item towards its neighbours' mean, keeping the order
      const want = row.map((i) => {
        const ns = near[i].filter((j) => rank[j] !== rank[i]);
        return ns.length ? ns.reduce((s, j) => s + x[j], 0) / ns.length : x[i];
      });
      let right = -Infinity;
      row.forEach((i, k) => {
        const w = kids[i].width;
        x[i] = Math.max(want[k], right + GAP_X + w / 2);
        right = x[i] + w / 2;
      });
    };
    for (let sweep = 0; sweep < 4; sweep++) {
      const down = sweep % 2 === 0;
      const near = down ? pred : succ;
      const seq = down ? rows : [...rows].reverse();
      for (const row of seq) {
        const bary = new Map(row.map((i) => {
          const ns = near[i];
          return [i, ns.length ? ns.reduce((s, j) => s + x[j], 0) / ns.length : x[i]];
        }));
        row.sort((p, q) => bary.get(p) - bary.get(q));
        centre(row, near);
      }
    }
    let minX = Infinity, maxX = -Infinity;
    for (let i = 0; i < n; i++) { minX = Math.min(minX, x[i] - kids[i].width / 2); maxX = Math.max(maxX, x[i] + kids[i].width / 2); }
    let top = 0;
    for (const row of rows) {
      const h = Math.max(...row.map((i) => kids[i].height));
      for (const i of row) { kids[i].x = x[i] - kids[i].width / 2 - minX; kids[i].y = top + (h - kids[i].height) / 2; }
      top += h + GAP_Y;
    }
    return { w: maxX - minX, h: top - GAP_Y };
  }
