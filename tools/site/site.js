// The static site's only script: no framework, no request but the site's own pictures.
// 1. Every explorer (div.tl-widget) carries its table of pictures, drawn in advance by the widget itself
//    (tools/make_site.py): one row per combination of control values, as indices into each control's values,
//    then the picture's file. Moving a control shows the row for the new values; a combination without a
//    picture (a bound that follows another control, e.g. the pair slider under d_model) moves to the nearest row
//    that keeps the value just chosen. A slider steps through the values that have a picture, given the others.
// 2. One button folds or unfolds every code cell (each also folds on its own: <details>).
(function () {
  "use strict";

  function explorer(root) {
    const table = JSON.parse(root.querySelector("script.tl-frames").textContent);
    const names = table.controls;
    const rows = table.frames;
    const pictures = new Map(rows.map((row) => [row.slice(0, -1).join(","), row[row.length - 1]]));
    const now = table.start.slice();
    const image = root.querySelector("img.tl-frame");
    const inputs = names.map((name) => root.querySelector('[data-control="' + name + '"]'));

    function available(c) { // the value indices of control c that have a picture, the other controls as they are
      const found = new Set();
      for (const row of rows) {
        if (names.every((_, j) => j === c || row[j] === now[j])) found.add(row[c]);
      }
      return Array.from(found).sort((a, b) => a - b);
    }

    function nearest(c) { // the row that keeps control c's value and moves the others least
      let best = null;
      let distance = Infinity;
      for (const row of rows) {
        if (row[c] !== now[c]) continue;
        const d = names.reduce((sum, _, j) => sum + Math.abs(row[j] - now[j]), 0);
        if (d < distance) { best = row; distance = d; }
      }
      names.forEach((_, j) => { now[j] = best[j]; });
    }

    function show() {
      inputs.forEach((input, c) => {
        const name = names[c];
        if (input.type === "range") {
          const values = available(c);
          input.max = String(values.length - 1);
          input.value = String(values.indexOf(now[c]));
          root.querySelector('output[data-for="' + name + '"]').textContent = table.labels[name][now[c]];
        } else if (input.type === "checkbox") {
          input.checked = table.values[name][now[c]] === true;
        } else {
          const values = available(c);
          input.value = String(now[c]);
          Array.from(input.options).forEach((option) => { option.disabled = !values.includes(Number(option.value)); });
        }
      });
      image.src = table.root + pictures.get(now.join(","));
      const shown = Object.assign({}, table.fixed);
      names.forEach((name, c) => { shown[name] = table.values[name][now[c]]; });
      root.dataset.values = JSON.stringify(shown); // what the picture shows: read by the browser test
    }

    inputs.forEach((input, c) => {
      input.addEventListener(input.type === "range" ? "input" : "change", () => {
        if (input.type === "range") now[c] = available(c)[Number(input.value)];
        else if (input.type === "checkbox") now[c] = table.values[names[c]].indexOf(input.checked);
        else now[c] = Number(input.value);
        if (!pictures.has(now.join(","))) nearest(c);
        show();
      });
    });
    show();
  }

  document.querySelectorAll(".tl-widget").forEach(explorer);

  const fold = document.getElementById("tl-fold");
  if (fold) {
    fold.addEventListener("click", () => {
      const cells = document.querySelectorAll("details.tl-code");
      const open = fold.dataset.open !== "true";
      cells.forEach((cell) => { cell.open = open; });
      fold.dataset.open = String(open);
      fold.textContent = open ? "fold all code" : "unfold all code";
    });
  }
})();
