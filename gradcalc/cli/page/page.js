// gradcalc graph --format html: draws the graph view (laid out by dagre) and plays its backward pass.
// All text reaches the page through textContent, never as markup: names come from students' files.
(function () {
  "use strict";
  const doc = JSON.parse(document.getElementById("graph-data").textContent);
  const SVG = "http://www.w3.org/2000/svg"; // the namespace's name, not a place anything is loaded from
  const of = doc.of;
  const nodes = doc.nodes;
  const edges = doc.edges;
  const steps = doc.steps;
  const $ = (id) => document.getElementById(id);
  const LINE = 17; // px per line of a node's box
  const PAD = 8;

  let step = 0; // how many steps of the backward pass are done
  let mode = "forward"; // "forward": values; "backward": gradients as the pass delivers them
  let selected = null;
  let timer = null;
  const view = { x: 0, y: 0, k: 1 };

  // ---- text ------------------------------------------------------------------------------------
  const measure = document.createElement("canvas").getContext("2d");
  function width(text, px, bold) {
    measure.font = (bold ? "700 " : "") + px + 'px ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace';
    return measure.measureText(text).width;
  }
  function oneLine(text) {
    const flat = String(text).replace(/\s*\n\s*/g, " ");
    return flat.length > 60 ? flat.slice(0, 59) + "…" : flat;
  }
  function el(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function html(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }
  const gradName = (n) => "∂" + of + "/∂" + n.name;
  const isSummary = (n) => n.kind === "collapsed" || n.kind === "omitted";

  // What a node's box says in each mode; the box is as wide as the wider of the two, so switching
  // modes does not move anything.
  function boxLines(n) {
    if (isSummary(n)) return { forward: n.box, backward: n.box };
    const shape = n.shape.length ? "shape " + n.shape.join("×") : null;
    const fn = n.grad_fn || (n.kind === "detached" ? "detached: no gradient" : "constant");
    const value = n.shape.length ? (n.value && n.value.length <= 40 ? n.value : null) : n.value;
    const forward = [n.name + (value !== null && value !== undefined ? " = " + oneLine(value) : ""), fn];
    const backward = [n.name, n.grad === null ? "no gradient" : gradName(n) + " = " + oneLine(n.grad)];
    if (shape) { forward.push(shape); backward.push(shape); }
    backward.push(fn);
    return { forward: forward, backward: backward };
  }

  // ---- layout ------------------------------------------------------------------------------------
  // dagre (vendored: gradcalc/cli/page/dagre.min.js, MIT) lays out a graph as Graphviz's dot does: ranks,
  // fewer crossings, edges routed around nodes, labels given room. Its cost grows with the ranks each edge
  // crosses (a weight shared by every loop iteration crosses them all): past DAGRE_LIMIT of those, the page
  // lays the graph out itself in simple layers, in linear time, so that any graph opens in a moment.
  const DAGRE_LIMIT = 400;
  const lines = nodes.map(boxLines);
  const flowText = edges.map((e) => flow(e));
  const sizes = nodes.map((n, i) => {
    const all = lines[i].forward.concat(lines[i].backward);
    const w = Math.max.apply(null, all.map((t, j) => width(t, 13, j === 0))) + 2 * PAD;
    const h = Math.max(lines[i].forward.length, lines[i].backward.length) * LINE + 2 * PAD - 2;
    return { width: Math.max(w, 48), height: h };
  });
  const labels = edges.map((e, i) => ({
    width: Math.max(width(e.label, 12), width(flowText[i] || "", 12, true)) + 8, height: flowText[i] ? 34 : 18 }));
  const ranks = longestPathRanks();
  const crossed = edges.reduce((sum, e) => sum + Math.max(1, ranks[e.to] - ranks[e.from]), 0);
  const byDagre = crossed + nodes.length <= DAGRE_LIMIT;
  const layout = byDagre ? dagreLayout() : layeredLayout();

  // Each node's rank: the longest path to it from the output (users above their inputs).
  function longestPathRanks() {
    const rank = nodes.map(() => 0);
    const into = nodes.map(() => 0);
    const out = nodes.map(() => []);
    edges.forEach((e) => { into[e.to] += 1; out[e.from].push(e.to); });
    const ready = nodes.map((_, i) => i).filter((i) => into[i] === 0);
    while (ready.length) {
      const i = ready.pop();
      out[i].forEach((j) => {
        rank[j] = Math.max(rank[j], rank[i] + 1);
        if (--into[j] === 0) ready.push(j);
      });
    }
    return rank;
  }

  function dagreLayout() {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "TB", nodesep: 28, ranksep: 56, edgesep: 12, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(() => ({}));
    nodes.forEach((n, i) => g.setNode(String(n.id), sizes[i]));
    edges.forEach((e, i) => g.setEdge(String(e.from), String(e.to),
      { width: labels[i].width, height: labels[i].height, labelpos: "c" }, "e" + i));
    dagre.layout(g);
    return { nodes: nodes.map((n) => g.node(String(n.id))),
      edges: edges.map((e, i) => g.edge(String(e.from), String(e.to), "e" + i)), size: g.graph() };
  }

  // Layers by rank, each ordered by where its users are (a few sweeps of barycentres), edges straight.
  function layeredLayout() {
    const layers = [];
    nodes.forEach((_, i) => (layers[ranks[i]] = layers[ranks[i]] || []).push(i));
    const users = nodes.map(() => []);
    edges.forEach((e) => users[e.to].push(e.from));
    const slot = nodes.map(() => 0);
    layers.forEach((layer) => layer.forEach((i, k) => (slot[i] = k)));
    for (let sweep = 0; sweep < 4; sweep++) {
      layers.forEach((layer, r) => {
        if (!r) return;
        const centre = (i) => users[i].length ? users[i].reduce((a, u) => a + slot[u], 0) / users[i].length : slot[i];
        const keyed = layer.map((i) => [centre(i), i]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        keyed.forEach((pair, k) => { layer[k] = pair[1]; slot[pair[1]] = k; });
      });
    }
    const boxes = nodes.map(() => null);
    const gap = 28;
    const rankGap = 70;
    let y = 16;
    let widest = 0;
    const rows = layers.map((layer) => {
      const w = layer.reduce((a, i) => a + sizes[i].width, 0) + gap * (layer.length - 1);
      widest = Math.max(widest, w);
      return w;
    });
    layers.forEach((layer, r) => {
      const h = Math.max.apply(null, layer.map((i) => sizes[i].height));
      let x = 16 + (widest - rows[r]) / 2;
      layer.forEach((i) => {
        boxes[i] = { x: x + sizes[i].width / 2, y: y + h / 2, width: sizes[i].width, height: sizes[i].height };
        x += sizes[i].width + gap;
      });
      y += h + rankGap;
    });
    const lanes = edges.map((e, i) => {
      const a = boxes[e.from];
      const b = boxes[e.to];
      const points = [{ x: a.x, y: a.y + a.height / 2 }, { x: b.x, y: b.y - b.height / 2 }];
      // the label on the last stretch, just above the input, where it cannot be mistaken for another edge's
      const t = Math.max(0.5, 1 - 40 / Math.max(1, points[1].y - points[0].y));
      return { points: points, x: points[0].x + (points[1].x - points[0].x) * t,
        y: points[0].y + (points[1].y - points[0].y) * t, width: labels[i].width, height: labels[i].height };
    });
    return { nodes: boxes, edges: lanes, size: { width: widest + 32, height: y - rankGap + 16 } };
  }

  // The gradient arriving along an edge: ∂output/∂user · ∂user/∂input (null: no gradient flows there).
  function flow(e) {
    if (e.detached || nodes[e.to].step === null || nodes[e.to].step === undefined) return null;
    const s = steps[nodes[e.to].step];
    const term = s.terms.find((t) => t.from === e.from);
    if (!term) return null;
    return term.product !== null ? term.upstream + " · " + term.local_value + " = " + term.product
      : "gradient flows (" + gradName(nodes[e.from]) + " · map)";
  }

  // ---- drawing -----------------------------------------------------------------------------------
  const svg = $("graph");
  const port = $("viewport");
  const defs = el("defs");
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "9", markerUnits: "userSpaceOnUse",
    markerHeight: "9", orient: "auto-start-reverse" });
  marker.appendChild(el("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8c959f" }));
  defs.appendChild(marker);
  svg.insertBefore(defs, port);

  const edgeEls = edges.map((e, i) => {
    const info = layout.edges[i];
    const group = el("g", { class: "edge" + (e.detached ? " detached" : ""), "data-from": e.from, "data-to": e.to });
    const d = info.points.map((p, j) => (j ? "L" : "M") + p.x.toFixed(1) + "," + p.y.toFixed(1)).join(" ");
    group.appendChild(el("path", { d: d, "marker-end": "url(#arrow)" }));
    const label = el("g", { transform: "translate(" + info.x.toFixed(1) + "," + info.y.toFixed(1) + ")" });
    label.appendChild(el("rect", { class: "label-bg", x: -info.width / 2, y: -info.height / 2, width: info.width,
      height: info.height, rx: 3 }));
    const top = flowText[i] ? -4 : 4;
    label.appendChild(el("text", { "text-anchor": "middle", y: top }, e.label));
    const arriving = el("text", { class: "flow", "text-anchor": "middle", y: top + 16 }, "");
    label.appendChild(arriving);
    group.appendChild(label);
    port.appendChild(group);
    return { group: group, arriving: arriving };
  });

  const nodeEls = nodes.map((n, i) => {
    const box = layout.nodes[i];
    const group = el("g", { class: "node " + n.kind, tabindex: "0", role: "button", "data-id": n.id,
      "data-name": n.name, "data-kind": n.kind,
      transform: "translate(" + (box.x - box.width / 2).toFixed(1) + "," + (box.y - box.height / 2).toFixed(1) + ")" });
    group.appendChild(el("rect", { width: box.width, height: box.height, rx: 7 }));
    const text = el("text", {});
    group.appendChild(text);
    port.appendChild(group);
    group.addEventListener("click", () => select(i));
    // Tabbed to (not clicked: moving it under the pointer would lose the click): brought into view.
    group.addEventListener("focus", () => { if (group.matches(":focus-visible")) reveal(i); });
    group.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); ev.stopPropagation(); select(i); }
    });
    return { group: group, text: text };
  });

  function drawNode(i) {
    const n = nodes[i];
    const parts = nodeEls[i];
    const reached = n.step !== null && n.step !== undefined && n.step < step;
    const shown = mode === "forward" ? lines[i].forward : lines[i].backward;
    parts.text.textContent = "";
    shown.forEach((t, j) => {
      const span = el("tspan", { x: PAD, y: PAD + 12 + j * LINE });
      if (j === 0) span.setAttribute("class", "name");
      if (mode === "backward" && j === 1 && !isSummary(n) && n.grad !== null) {
        // the gradient's line: its number only once the backward pass has delivered it
        span.setAttribute("class", "gradline" + (reached ? "" : " pending"));
        span.appendChild(el("tspan", {}, gradName(n) + " = "));
        span.appendChild(el("tspan", { class: "grad-value" }, reached ? oneLine(n.grad) : "?"));
      } else {
        span.textContent = t;
        if (j === shown.length - 1 && j > 0 && !isSummary(n)) span.setAttribute("class", "fn");
      }
      parts.text.appendChild(span);
    });
    const now = step > 0 && steps[step - 1].node === n.id;
    parts.group.classList.toggle("now", now);
    parts.group.classList.toggle("done", reached && mode === "backward");
    const label = n.name + ": " + (mode === "forward" ? "value " + (n.value === null ? "none" : n.value)
      : (reached ? gradName(n) + " = " + n.grad : "gradient not yet computed"));
    parts.group.setAttribute("aria-label", label);
  }

  function drawEdges() {
    const current = step > 0 ? steps[step - 1] : null;
    edges.forEach((e, i) => {
      const target = nodes[e.to];
      const done = mode === "backward" && flowText[i] && target.step !== null && target.step < step;
      edgeEls[i].arriving.textContent = done ? flowText[i] : "";
      edgeEls[i].group.classList.toggle("arriving", !!current && current.node === e.to && !!flowText[i]);
    });
  }

  // ---- the backward pass ---------------------------------------------------------------------------
  function render() {
    nodes.forEach((_, i) => drawNode(i));
    drawEdges();
    $("counter").textContent = steps.length ? "step " + step + " of " + steps.length : "no backward pass";
    $("back").disabled = $("reset").disabled = step === 0;
    $("next").disabled = $("end").disabled = step >= steps.length;
    $("play").disabled = !steps.length;
    $("mode").textContent = mode === "forward" ? "Show gradients" : "Show values";
    $("mode").setAttribute("aria-pressed", mode === "backward" ? "true" : "false");
    describeStep();
  }

  function describeStep() {
    const box = $("step");
    box.textContent = "";
    if (!steps.length) {
      box.appendChild(html("h2", "The backward pass"));
      box.appendChild(html("p", doc.complete ? "No gradients: " + of + " is not a scalar, or nothing it depends on is "
        + "a variable." : "The graph has " + doc.total.toLocaleString("en") + " nodes: long runs are summarised, "
        + "so its backward pass is not played here; gradcalc grad gives the gradients."));
      return;
    }
    if (step === 0) {
      box.appendChild(html("h2", "The backward pass"));
      box.appendChild(html("p", "Press Step (or →) to run it node by node from " + of + ": each node's gradient "
        + "arrives along the edges from the nodes that use it, as ∂" + of + "/∂user · ∂user/∂node, and adds up."));
      return;
    }
    const s = steps[step - 1];
    const n = nodes[s.node];
    box.appendChild(html("h2", "Step " + step + ": " + gradName(n)));
    const lines = [];
    if (s.node === 0) {
      lines.push(gradName(n) + " = 1   (the seed: " + of + " with respect to itself)");
    } else {
      s.terms.forEach((t) => {
        const user = nodes[t.from].name;
        let line = "via " + user + ": " + gradName(nodes[t.from]) + " · ∂" + user + "/∂" + n.name + " = "
          + t.upstream + " · (" + t.local + ")";
        if (t.product !== null) line += " = " + t.product;
        lines.push(line);
      });
      if (s.terms.length > 1 && s.total !== null) {
        lines.push("sum: " + s.terms.map((t) => t.product).join(" + ").replace(/\+ -/g, "- ") + " = " + s.total);
      }
    }
    box.appendChild(html("p", lines.join("\n"), "mono"));
    const verdict = s.total === null ? "from autograd: " + gradName(n) + " = " + s.grad
      : (s.agrees ? "✓ equals " : "≠ ") + gradName(n) + " = " + s.grad + " from autograd";
    box.appendChild(html("p", verdict, "mono " + (s.total === null || s.agrees ? "ok" : "bad")));
  }

  function go(to) {
    step = Math.max(0, Math.min(steps.length, to));
    if (step > 0) mode = "backward";
    render();
    if (step > 0) reveal(steps[step - 1].node);
    if (step >= steps.length) pause();
  }
  function pause() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    $("play").textContent = "▶ Play";
    $("play").setAttribute("aria-pressed", "false");
  }
  function play() {
    if (timer !== null) { pause(); return; }
    if (step >= steps.length) go(0);
    $("play").textContent = "⏸ Pause";
    $("play").setAttribute("aria-pressed", "true");
    timer = setInterval(() => go(step + 1), 900);
    go(step + 1);
  }

  // ---- a node's details ------------------------------------------------------------------------------
  function select(i) {
    selected = i;
    const n = nodes[i];
    nodeEls.forEach((p, j) => p.group.classList.toggle("selected", j === i));
    const onPath = new Set();
    const onPathEdges = new Set();
    const box = $("details");
    box.textContent = "";
    box.appendChild(html("h2", n.name));
    const facts = html("dl");
    const fact = (term, value) => {
      facts.appendChild(html("dt", term));
      facts.appendChild(html("dd", value, "mono"));
    };
    if (isSummary(n)) {
      fact("stands for", n.box.join("\n"));
    } else {
      fact("value", n.value === null ? "—" : n.value);
      fact(gradName(n), n.grad === null ? "no gradient" : n.grad);
      fact("grad_fn", n.grad_fn || (n.kind === "detached" ? "none: detached, no gradient" : "none: a constant"));
      if (n.shape.length) fact("shape", n.shape.join("×"));
      fact("kind", n.kind);
      if (n.statement) fact(n.line ? "line " + n.line : "made by", n.statement);
      if (n.origin.length) fact("made in", n.origin.join(", "));
    }
    box.appendChild(facts);
    const paths = n.paths;
    if (paths) {
      // explain's own text for this node: the same paths, products and sum as `gradcalc explain --wrt`
      box.appendChild(html("h2", "Paths from " + of + " to " + n.name));
      box.appendChild(html("p", "gradcalc explain --wrt " + n.name + ":", "hint"));
      box.appendChild(html("pre", paths.text, "mono paths"));
      paths.routes.forEach((route) => route.forEach((k, j) => {
        onPath.add(k);
        if (j) onPathEdges.add(route[j - 1] + ">" + k);
      }));
      paths.via.forEach((k) => { onPath.add(k); onPathEdges.add(k + ">" + i); });
    } else if (n.grad !== null && !isSummary(n)) {
      box.appendChild(html("p", "Run gradcalc explain --wrt " + n.name + " for its chain-rule paths (this graph is "
        + "too large to list them for every node here).", "hint"));
    }
    nodeEls.forEach((p, j) => p.group.classList.toggle("on-path", onPath.has(j) && j !== i));
    edges.forEach((e, j) => edgeEls[j].group.classList.toggle("on-path", onPathEdges.has(e.from + ">" + e.to)));
  }

  // ---- zoom and pan ------------------------------------------------------------------------------------
  function place() {
    port.setAttribute("transform", "translate(" + view.x.toFixed(2) + "," + view.y.toFixed(2) + ") scale("
      + view.k.toFixed(4) + ")");
  }
  function fit() {
    const size = layout.size;
    const rect = svg.getBoundingClientRect();
    let k = Math.min(rect.width / (size.width || 1), rect.height / (size.height || 1), 1.6);
    // A graph too large to read whole: as wide as the screen (at most full size), the output at the top.
    if (k < 0.5) k = Math.min(rect.width / (size.width || 1), 1);
    view.k = k > 0 ? k : 1;
    view.x = Math.max(0, (rect.width - size.width * view.k) / 2);
    view.y = Math.max(0, (rect.height - size.height * view.k) / 2);
    place();
  }
  // Pan (without zooming) so that node i is on screen: the step being shown is always in sight.
  function reveal(i) {
    const box = layout.nodes[i];
    const rect = svg.getBoundingClientRect();
    const x = view.x + box.x * view.k;
    const y = view.y + box.y * view.k;
    const w = box.width * view.k / 2 + 8;
    const h = box.height * view.k / 2 + 8;
    // as little as brings it in: the rest of the picture stays where the student left it
    if (x - w < 0) view.x += w - x;
    else if (x + w > rect.width) view.x -= x + w - rect.width;
    if (y - h < 0) view.y += h - y;
    else if (y + h > rect.height) view.y -= y + h - rect.height;
    place();
  }
  function zoom(factor, cx, cy) {
    const rect = svg.getBoundingClientRect();
    const x = cx === undefined ? rect.width / 2 : cx;
    const y = cy === undefined ? rect.height / 2 : cy;
    const k = Math.max(0.05, Math.min(8, view.k * factor));
    view.x = x - (x - view.x) * (k / view.k);
    view.y = y - (y - view.y) * (k / view.k);
    view.k = k;
    place();
  }
  function pan(dx, dy) { view.x += dx; view.y += dy; place(); }
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const rect = svg.getBoundingClientRect();
    zoom(Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0015)), ev.clientX - rect.left, ev.clientY - rect.top);
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0 || ev.target.closest(".node")) return;
    drag = { x: ev.clientX, y: ev.clientY };
    svg.setPointerCapture(ev.pointerId);
    svg.classList.add("dragging");
  });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    pan(ev.clientX - drag.x, ev.clientY - drag.y);
    drag = { x: ev.clientX, y: ev.clientY };
  });
  const stop = () => { drag = null; svg.classList.remove("dragging"); };
  svg.addEventListener("pointerup", stop);
  svg.addEventListener("pointercancel", stop);

  // ---- controls -------------------------------------------------------------------------------------
  $("reset").addEventListener("click", () => { pause(); go(0); });
  $("back").addEventListener("click", () => { pause(); go(step - 1); });
  $("next").addEventListener("click", () => { pause(); go(step + 1); });
  $("end").addEventListener("click", () => { pause(); go(steps.length); });
  $("play").addEventListener("click", play);
  $("mode").addEventListener("click", () => { mode = mode === "forward" ? "backward" : "forward"; render(); });
  $("zoom-in").addEventListener("click", () => zoom(1.25));
  $("zoom-out").addEventListener("click", () => zoom(0.8));
  $("zoom-fit").addEventListener("click", fit);
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const onButton = ev.target instanceof HTMLButtonElement;
    if (ev.shiftKey && ev.key.startsWith("Arrow")) {
      const d = 60;
      pan(ev.key === "ArrowLeft" ? d : ev.key === "ArrowRight" ? -d : 0,
        ev.key === "ArrowUp" ? d : ev.key === "ArrowDown" ? -d : 0);
    } else if (ev.key === "ArrowRight") { pause(); go(step + 1); }
    else if (ev.key === "ArrowLeft") { pause(); go(step - 1); }
    else if (ev.key === "Home") { pause(); go(0); }
    else if (ev.key === "End") { pause(); go(steps.length); }
    else if (ev.key === "p" || ev.key === "P" || (ev.key === " " && !onButton)) play();
    else if (ev.key === "m" || ev.key === "M") $("mode").click();
    else if (ev.key === "+" || ev.key === "=") zoom(1.25);
    else if (ev.key === "-" || ev.key === "_") zoom(0.8);
    else if (ev.key === "0") fit();
    else return;
    ev.preventDefault();
  });

  document.title = "∂" + of + ": the graph of " + of + ", step by step";
  $("title").textContent = "gradcalc graph of " + of;
  render();
  fit();
  window.addEventListener("resize", fit);
  if (!byDagre) {
    $("keys").appendChild(html("p", "A large graph: laid out in simple layers (each node below the nodes that use "
      + "it), which takes a moment however large it is."));
  }
  document.body.setAttribute("data-layout", byDagre ? "dagre" : "layers");
  document.body.setAttribute("data-ready", "true"); // for tests: drawn and laid out
})();
