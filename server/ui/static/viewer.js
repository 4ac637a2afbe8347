// The viewer's one script: tabs, the links between source lines and stage lines, live search.
// Pages work without it (the first stage shows, search submits the form); it only adds behaviour.
"use strict";

function showTab(tabs, name) {
  const section = tabs.closest(".stages");
  for (const b of tabs.querySelectorAll(".tab")) b.classList.toggle("on", b.dataset.tab === name);
  for (const p of section.querySelectorAll(".pane")) p.hidden = p.dataset.pane !== name && !section.classList.contains("all");
}

function tabsOf(section) {
  return section.querySelector(".tabs");
}

// Light up source line `line` and every stage line made from it; name how many each stage has.
function link(line) {
  for (const el of document.querySelectorAll(".hit")) el.classList.remove("hit");
  for (const c of document.querySelectorAll("[data-count]")) c.textContent = "";
  if (line === null) return;
  const source = document.querySelector(`.s[data-line="${line}"]`);
  if (source) source.classList.add("hit");
  const hits = document.querySelectorAll(`.pane [data-src="${line}"]`);
  const counts = {};
  for (const el of hits) {
    el.classList.add("hit");
    const stage = el.closest(".pane").dataset.pane;
    counts[stage] = (counts[stage] || 0) + 1;
  }
  for (const [stage, n] of Object.entries(counts)) {
    const c = document.querySelector(`[data-count="${stage}"]`);
    if (c) c.textContent = ` ${n}`;
  }
  for (const pane of document.querySelectorAll(".pane")) {
    const first = pane.hidden ? null : pane.querySelector(".hit");
    if (first) first.scrollIntoView({block: "nearest"});
  }
  if (source) source.scrollIntoView({block: "nearest"});
}

function onClick(event) {
  const tab = event.target.closest(".tab");
  if (tab) return showTab(tab.closest(".tabs"), tab.dataset.tab);
  const toggle = event.target.closest("#side-by-side");
  if (toggle) {
    const section = toggle.closest(".stages");
    section.classList.toggle("all");
    const on = tabsOf(section).querySelector(".tab.on");
    return showTab(tabsOf(section), on ? on.dataset.tab : "ir");
  }
  const row = event.target.closest(".l");
  if (!row) return;
  if (row.classList.contains("s")) return link(row.dataset.line);
  if (row.dataset.src !== undefined) return link(row.dataset.src);
}

function filterRows(input) {
  const text = input.value.trim().toLowerCase();
  const glob = /[*?[]/.test(text);
  for (const row of document.querySelectorAll("table.kernels tbody tr")) {
    const name = row.querySelector(".kernel").textContent.toLowerCase();
    row.hidden = !glob && text !== "" && !name.includes(text);
  }
}

document.addEventListener("click", onClick);
document.addEventListener("DOMContentLoaded", () => {
  const search = document.getElementById("search");
  if (search) search.addEventListener("input", () => filterRows(search));
});
