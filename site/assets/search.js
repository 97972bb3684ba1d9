// The site's search: a box in the header, answered by Pagefind (pagefind/ at the site's root, indexed after the
// build by extractor/search.py). Nothing is fetched until the box is focused; then Pagefind loads its code and,
// per query, only the index chunks and the result excerpts it needs.
const config = JSON.parse(document.getElementById("__config")?.textContent ?? "{}");
const base = new URL(`${config.base ?? "."}/`, location.href);
let engine;

function pagefind() {
  engine ??= import(new URL("pagefind/pagefind.js", base).href).then(async (pf) => {
    await pf.options({ baseUrl: base.pathname, excerptLength: 24 });
    pf.init();
    return pf;
  });
  return engine;
}

// An excerpt as nodes: its text, and the <mark> elements Pagefind puts around the words found; nothing else.
function excerpt(html) {
  const out = document.createElement("span");
  out.className = "ve-search__excerpt";
  for (const node of new DOMParser().parseFromString(html, "text/html").body.childNodes) {
    if (node.nodeName === "MARK") {
      const mark = document.createElement("mark");
      mark.textContent = node.textContent;
      out.append(mark);
    } else {
      out.append(document.createTextNode(node.textContent));
    }
  }
  return out;
}

function item(data) {
  const li = document.createElement("li");
  const a = document.createElement("a");
  a.href = data.url;
  const title = document.createElement("span");
  title.className = "ve-search__title";
  title.textContent = data.meta?.title ?? data.url;
  a.append(title, excerpt(data.excerpt ?? ""));
  li.append(a);
  return li;
}

function mount() {
  const header = document.querySelector(".md-header__inner");
  if (!header || header.querySelector(".ve-search")) return;
  const form = document.createElement("form");
  form.className = "ve-search";
  form.setAttribute("role", "search");
  const input = document.createElement("input");
  Object.assign(input, { type: "search", placeholder: "Search errors", autocomplete: "off", spellcheck: false });
  input.setAttribute("aria-label", "Search errors");
  const results = document.createElement("ol");
  results.className = "ve-search__results";
  results.hidden = true;
  form.append(input, results);
  header.insertBefore(form, header.querySelector(".md-header__source"));

  let asked = 0;
  input.addEventListener("focus", () => pagefind(), { once: true });
  input.addEventListener("input", async () => {
    const query = input.value.trim();
    const mine = ++asked;
    const started = performance.now();
    if (!query) {
      results.hidden = true;
      results.replaceChildren();
      return;
    }
    const pf = await pagefind();
    const found = await pf.debouncedSearch(query, {}, 40);
    if (found === null || mine !== asked) return; // a newer query is on its way
    const shown = await Promise.all(found.results.slice(0, 10).map((r) => r.data()));
    if (mine !== asked) return;
    if (shown.length) {
      results.replaceChildren(...shown.map(item));
    } else {
      const none = document.createElement("li");
      none.className = "ve-search__none";
      none.textContent = "No page matches. To find the error behind a message or a traceback, paste it into the lookup box on the home page.";
      results.replaceChildren(none);
    }
    results.hidden = false;
    form.dataset.query = query; // what the results shown answer, and how long after the keystroke (read by tests)
    form.dataset.ms = String(Math.round(performance.now() - started));
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    results.querySelector("a")?.click();
  });
  document.addEventListener("keydown", (event) => {
    const typing = event.target instanceof HTMLInputElement || event.target instanceof HTMLTextAreaElement;
    if (event.key === "/" && !typing) {
      event.preventDefault();
      input.focus();
    } else if (event.key === "Escape") {
      results.hidden = true;
    }
  });
}

mount();
