// Looking up a pasted error: extractor/lookup.py's algorithm, function for function, and the box on the home page.
//
// tests/lookup/vectors.json keeps the two in step (tests/lookup/run_vectors.mjs runs them here). Python's
// regular expressions are Unicode-aware where JavaScript's are not, and Python counts code points where
// JavaScript counts UTF-16 units, so both are spelled out below wherever a result depends on them.

export const INDEX_FORMAT = 1;
export const MAX_STEPS = 5000;
export const MAX_PASTE = 200_000;
export const MAX_MESSAGE = 20_000;

// Python's \s (str.isspace), \w and \d, which JavaScript's ASCII-only classes are not; and Python's `$`,
// which also matches before a final newline.
const SPACE_CODES = [0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000];
const SPACES = new Set(SPACE_CODES);
const S_ = SPACE_CODES.map((c) => "\\u" + c.toString(16).padStart(4, "0")).join("");
const S = `[${S_}]`;
const NS = `[^${S_}]`;
const W_ = String.raw`\p{L}\p{N}_`;
const D = String.raw`\p{Nd}`;
const END = String.raw`(?=\n?$)`;
const re = (source, flags = "") => new RegExp(source, "u" + flags);

const PREFIXES = [
  re(String.raw`^${S}*\([A-Za-z_][${W_}\-]*(?: [${W_}\-]+)? pid=${D}+\)${S}?`),
  re(String.raw`^${S}*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)${S}+${D}${D}-${D}${D} ${D}${D}:${D}${D}:${D}${D}(?:\.${D}+)?${S}+\[[^\]]*\]${S}?`),
  re(String.raw`^${S}*\[rank${D}+\]:${S}?`),
  re(String.raw`^${S}*[${W_}.\-]+-${D}+${S}+\|${S}?`),
  re(String.raw`^${S}*${D}{4}-${D}${D}-${D}${D}[T ]${D}${D}:${D}${D}:${D}${D}(?:[.,]${D}+)?(?:Z|[+\-]${D}${D}:?${D}${D})?${S}+(?:\|${S}*)?`),
];
const FRAME = re(String.raw`^${S}*File "([^"]+)", line (${D}+), in (${NS}+)`);
const EXCEPTION = re(String.raw`^([A-Za-z_][${W_}.]*(?:Error|Exception|Exit|Warning|Interrupt|Iteration))(?:: ?([^\n]*))?${END}`);
const CHAIN = re(String.raw`^(?:During handling of the above exception, another exception occurred:|The above exception was the direct cause of the following exception:)${S}*${END}`);
const PYDANTIC = re(String.raw`(?:Value|Assertion) error, ([^]*?)(?: \[type=[${W_}]+, input_value=[^]*)?${END}`);
const VALIDATION_SUFFIX = re(String.raw` \(parameter=[^,()]*, value=[^]*\)${END}`);
// Python's re.IGNORECASE also lets s match ſ, and i match İ and ı.
const VERSION = re(String.raw`(?<![${W_}])[vV][lL][lL][mM](?: [vV][eE][rR][sSſ][iIİı][oO][nN])?[ =:/_\-]*[vV]?(${D}+\.${D}+\.${D}+)`);
const SPACE_RUN = re(`${S}+`, "g");
const WORD = /[a-z_][a-z0-9_]{2,}/g;

export function strip(text) {
  let start = 0;
  let end = text.length;
  while (start < end && SPACES.has(text.charCodeAt(start))) start++;
  while (end > start && SPACES.has(text.charCodeAt(end - 1))) end--;
  return text.slice(start, end);
}

export function fold(text) {
  return strip(text.replace(SPACE_RUN, " "));
}

// Lengths and slices in code points, as Python's len() and [:n] count.
function codePoints(text) {
  let n = text.length;
  for (let i = 0; i < text.length - 1; i++) {
    if (isPair(text, i)) {
      n--;
      i++;
    }
  }
  return n;
}

function isPair(text, i) {
  const c = text.charCodeAt(i);
  return c >= 0xd800 && c < 0xdc00 && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
}

function advance(text, at, n) {
  while (n-- > 0 && at < text.length) at += isPair(text, at) ? 2 : 1;
  return at;
}

function leading(text, n) {
  return text.length <= n ? text : text.slice(0, advance(text, 0, n));
}

function trailing(text, n) {
  if (text.length <= n) return text;
  let at = text.length;
  while (n-- > 0 && at > 0) at -= at >= 2 && isPair(text, at - 2) ? 2 : 1;
  return text.slice(at);
}

// Python's find: -1, not the end, when the start lies past the end.
function find(text, sub, start) {
  return start > text.length ? -1 : text.indexOf(sub, start);
}

// Python's int() of a run of decimal digits, in any script: each script's digits run 0 to 9 in a row.
const DIGIT = re(`^${D}$`);
function integer(digits) {
  let value = 0;
  for (const ch of digits) {
    const code = ch.codePointAt(0);
    let zero = code;
    while (DIGIT.test(String.fromCodePoint(zero - 1))) zero--;
    value = value * 10 + ((code - zero) % 10);
  }
  return value;
}

// Python's round(x, 2): the nearest of the two-decimal numbers, ties to even.
export function round2(x) {
  const a = Math.abs(x);
  let r;
  if (Number.isInteger(a * 8) && !Number.isInteger(a * 4)) {
    const low = Math.floor(a * 100); // a tie, x.xx5 exactly: go to the even one
    r = (low % 2 === 0 ? low : low + 1) / 100;
  } else {
    r = Number(a.toFixed(2));
  }
  return x < 0 ? -r : r;
}

// Python's comparison of strings, by code point.
function compare(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i].codePointAt(0) - y[i].codePointAt(0);
  }
  return x.length - y.length;
}

function byScore(a, b) {
  return b.score - a.score || (a.id === b.id ? 0 : compare(a.id, b.id));
}

// --- reading a paste --------------------------------------------------------------------------------

export function stripPrefixes(line) {
  let changed = true;
  while (changed) {
    changed = false;
    for (const prefix of PREFIXES) {
      const stripped = line.replace(prefix, "");
      if (stripped !== line) {
        line = stripped;
        changed = true;
      }
    }
  }
  return line;
}

export function vllmPath(file) {
  const path = file.replaceAll("\\", "/");
  const at = path.lastIndexOf("/vllm/");
  return at >= 0 ? path.slice(at + 1) : "";
}

/** The exceptions a paste shows, causes first, each with its message and the frames above it. */
export function readPaste(text) {
  const lines = trailing(text, MAX_PASTE).split("\n").map((line) => stripPrefixes(line.replace(/\r+$/, "")));
  let version = null;
  for (const line of lines) {
    const m = VERSION.exec(line);
    if (m) {
      version = m[1];
      break;
    }
  }
  const frameAt = lines.map((line) => FRAME.exec(line));
  const lastFrame = frameAt.findLastIndex((m) => m !== null); // _looks_final(lines, i) is lastFrame <= i
  const raised = [];
  let frames = [];
  let i = 0;
  while (i < lines.length) {
    const frame = frameAt[i];
    if (frame) {
      frames.push({ path: vllmPath(frame[1]), line: integer(frame[2]), function: frame[3] });
      i++;
      continue;
    }
    const exc = EXCEPTION.exec(strip(lines[i]));
    if (exc && (frames.length || !raised.length || i === lines.length - 1 || lastFrame <= i)) {
      const message = [exc[2] ?? ""];
      let j = i + 1;
      while (j < lines.length && strip(lines[j]) && !frameAt[j] && !CHAIN.test(strip(lines[j])) && !lines[j].startsWith("Traceback")) {
        message.push(strip(lines[j]));
        j++;
      }
      raised.push({ type: exc[1], message: unwrap(message.join("\n")), frames });
      frames = [];
      i = j;
      continue;
    }
    i++;
  }
  if (!raised.length) {
    const body = lines.filter((line, k) => strip(line) && !frameAt[k] && !line.startsWith("Traceback"));
    raised.push({ type: "", message: unwrap(body.join("\n")), frames });
  }
  return { raised, version };
}

/** The message vLLM raised, out of pydantic's report and without VLLMValidationError's suffix. */
export function unwrap(message) {
  const pydantic = PYDANTIC.exec(message);
  const reported = pydantic && message.slice(0, advance(message, pydantic.index, 40)).toLowerCase().includes("validation error");
  if (reported || message.startsWith("Value error, ") || message.startsWith("Assertion error, ")) {
    message = pydantic ? pydantic[1] : message;
  }
  message = fold(message);
  // The suffix ends the message: without a final ")" the regex could only fail, slowly on a long paste.
  return message.endsWith(")") ? message.replace(VALIDATION_SUFFIX, "") : message;
}

// --- matching ---------------------------------------------------------------------------------------

export function confidence(match) {
  if (match.frameAgrees || (match.how === "full" && match.typeAgrees !== false && match.literal >= 12)) return "high";
  if ((match.how === "full" || match.how === "truncated") && match.literal >= 8) return "medium";
  return "low";
}

/**
 * Match a message against template parts: [how, literal characters, values] or null, how being
 * "full" or "truncated". Literal text must appear in order (white space folded); each placeholder
 * takes the shortest text that lets the rest match. A message cut short may end inside any part.
 */
export function matchParts(parts, text, literals = null) {
  literals = literals && literals.length ? literals : foldedLiterals(parts);
  let steps = 0;

  function at(pi, ti, values) {
    if (++steps > MAX_STEPS) return null;
    if (pi === parts.length) return ti === text.length ? ["full", 0, values] : null;
    const lit = literals[pi];
    if (lit !== null) {
      if (text.startsWith(lit, ti)) {
        const rest = at(pi + 1, ti + lit.length, values);
        return rest ? [rest[0], rest[1] + codePoints(strip(lit)), rest[2]] : null;
      }
      const rest = text.slice(ti);
      if (rest && lit.startsWith(rest) && strip(rest).length >= 1) return ["truncated", codePoints(strip(rest)), values];
      return null;
    }
    const name = parts[pi][0];
    if (pi === parts.length - 1) return ["full", 0, { ...values, [name]: text.slice(ti) }];
    const next = literals[pi + 1];
    let j = next ? find(text, next, ti) : ti;
    while (j >= 0) {
      const found = at(pi + 1, j, { ...values, [name]: text.slice(ti, j) });
      if (found) return found;
      // Where two placeholders meet, Python's text.find(None) raises TypeError: stop trying instead.
      j = next === null ? -1 : find(text, next, j + 1);
    }
    if (ti < text.length) return ["truncated", 0, { ...values, [name]: text.slice(ti) }];
    return null;
  }

  if (!parts.length) return null;
  return at(0, 0, {});
}

/** Each literal part with white space folded, keeping one space where it meets a placeholder. */
export function foldedLiterals(parts) {
  return parts.map((p, k) => {
    if (typeof p !== "string") return null;
    const lead = p && SPACES.has(p.charCodeAt(0)) && k > 0 ? " " : "";
    const trail = p && SPACES.has(p.charCodeAt(p.length - 1)) && k < parts.length - 1 ? " " : "";
    return fold(p) ? lead + fold(p) + trail : p ? " " : "";
  });
}

/** The index's errors, prepared once for matching many pastes. */
export function prepare(index) {
  return index.errors.map((error) => {
    const parts = error.p;
    const anchored = parts.length > 0 && typeof parts[0] === "string";
    const first = anchored ? parts[0] : parts.find((p) => typeof p === "string" && fold(p)) ?? "";
    return {
      id: error.i,
      types: error.t,
      parts,
      literals: foldedLiterals(parts),
      head: leading(fold(first), 16),
      anchored,
      sites: error.s,
      title: error.n,
      words: null, // for _similar, filled when first needed
    };
  });
}

/** A cheap test before matching: the message starts like the template's first literal text
 * (or, when the template starts with a placeholder, contains the literal that follows it). */
export function couldMatch(entry, text) {
  if (entry.anchored) return text.startsWith(entry.head) || entry.head.startsWith(text);
  return !entry.head || text.includes(entry.head);
}

/** The best matches for the last exception in the paste that vLLM raised, best first. */
export function rank(index, paste, top = 5) {
  return rankPaste(index, paste, top).matches;
}

/** rank(), and which of paste.raised the matches are for (null for "similar" candidates). */
export function rankPaste(index, paste, top = 5) {
  const entries = Array.isArray(index) ? index : prepare(index);
  for (let k = paste.raised.length - 1; k >= 0; k--) {
    const found = rankOne(entries, paste.raised[k], top);
    if (found.length) return { matches: found, at: k };
  }
  // Python computes the candidates for every exception on the way; only the first one's are returned.
  const first = paste.raised[0];
  return { matches: first ? similar(entries, leading(fold(first.message), MAX_MESSAGE), top) : [], at: null };
}

function rankOne(entries, raised, top) {
  const text = leading(fold(raised.message), MAX_MESSAGE);
  let pastedType = raised.type.slice(raised.type.lastIndexOf(".") + 1);
  if (pastedType === "ValidationError") pastedType = "ValueError"; // pydantic wraps the ValueError a validator raised
  const vllmFrames = raised.frames.filter((f) => f.path);
  const last = vllmFrames.length ? vllmFrames[vllmFrames.length - 1] : null;
  const found = [];
  for (const entry of entries) {
    const frameAgrees = Boolean(last && entry.sites.some((s) => s[0] === last.path && (s[1] === last.line || s[2] === last.function)));
    const result = entry.parts.length && text && couldMatch(entry, text) ? matchParts(entry.parts, text, entry.literals) : null;
    if (result === null && !frameAgrees) continue;
    const exactFrame = Boolean(last && entry.sites.some((s) => s[0] === last.path && s[1] === last.line));
    const typeAgrees = pastedType && entry.types.length ? entry.types.includes(pastedType) : null;
    const [how, literal, values] = result ?? ["frame", 0, {}];
    let score = literal * (how === "full" ? 1.0 : 0.8);
    score += typeAgrees === true ? 30 : typeAgrees === false ? -30 : 0;
    score += exactFrame ? 200 : frameAgrees ? 100 : 0;
    found.push({ id: entry.id, title: entry.title, score: round2(score), how, values, literal, typeAgrees, frameAgrees });
  }
  found.sort(byScore);
  return found.slice(0, top);
}

function words(text) {
  return new Set(text.toLowerCase().match(WORD) ?? []);
}

/** No template matches: the errors sharing the most words with the paste, as candidates. */
function similar(entries, text, top) {
  const mine = words(text);
  if (!mine.size) return [];
  const scored = [];
  for (const entry of entries) {
    entry.words ??= words(entry.parts.filter((p) => typeof p === "string").join(" "));
    if (!entry.words.size) continue;
    let shared = 0;
    for (const w of mine) if (entry.words.has(w)) shared++;
    const ratio = shared / (mine.size + entry.words.size - shared);
    if (ratio > 0.1) {
      scored.push({ id: entry.id, title: entry.title, score: round2(ratio * 10), how: "similar", values: {}, literal: 0, typeAgrees: null, frameAgrees: false });
    }
  }
  scored.sort(byScore);
  return scored.slice(0, top);
}

// --- the box ----------------------------------------------------------------------------------------

const ROOT = new URL("../", import.meta.url); // this file is <site>/assets/lookup.js
const DEBOUNCE_MS = 100;
const SHOWN_VALUE = 200; // characters of a placeholder's value shown

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function shorten(text, n) {
  return text.length > n ? text.slice(0, n) + "…" : text;
}

function errorLink(match) {
  const link = element("a", "ve-lookup__title", match.title);
  link.href = new URL(`errors/${encodeURIComponent(match.id)}.html`, ROOT).href;
  return link;
}

function matchItem(match) {
  const item = element("li", "ve-lookup__match");
  const level = confidence(match);
  item.append(errorLink(match), " ", element("span", `ve-lookup__confidence ve-lookup__confidence--${level}`, `${level} confidence`));
  if (match.how === "truncated") item.append(" ", element("span", "ve-lookup__note", "the message looks cut short"));
  if (match.how === "frame") item.append(" ", element("span", "ve-lookup__note", "found by the traceback's last vLLM line"));
  const values = Object.entries(match.values).filter(([, value]) => value !== "");
  if (values.length) {
    const list = element("div", "ve-lookup__values");
    for (const [name, value] of values) list.append(element("code", null, `${name} = ${shorten(value, SHOWN_VALUE)}`), " ");
    item.append(list);
  }
  return item;
}

function raisedText(raised) {
  return shorten(raised.type ? `${raised.type}: ${raised.message}` : raised.message, 300);
}

/** What the box shows for a paste: the matches, or "No error matches" and the closest candidates. */
export function renderResults(entries, release, text) {
  const out = document.createDocumentFragment();
  if (!strip(text)) return out;
  const paste = readPaste(text);
  const { matches, at } = rankPaste(entries, paste, 5);
  if (at === null) {
    out.append(element("p", "ve-lookup__status", `No error matches this paste in vLLM ${release}.`));
    if (matches.length) {
      out.append(element("p", "ve-lookup__status", "Closest candidates:"));
      const list = element("ol", "ve-lookup__list");
      for (const m of matches) {
        const item = element("li", "ve-lookup__match");
        item.append(errorLink(m));
        list.append(item);
      }
      out.append(list);
    }
    return out;
  }
  const list = element("ol", "ve-lookup__list");
  for (const m of matches) list.append(matchItem(m));
  out.append(list);
  if (at > 0) {
    const cause = paste.raised[at - 1];
    const line = element("p", "ve-lookup__cause", "Raised while handling: ");
    line.append(element("code", null, raisedText(cause)));
    const found = rankPaste(entries, { raised: [cause] }, 1);
    if (found.at !== null) line.append(" — ", errorLink(found.matches[0]));
    out.append(line);
  }
  return out;
}

function mountBox(root) {
  const box = element("textarea", "ve-lookup__input");
  box.placeholder = "Paste the error or the whole traceback";
  box.setAttribute("aria-label", "Paste the error or the whole traceback");
  box.rows = 6;
  box.spellcheck = false;
  const results = element("div", "ve-lookup__results");
  results.setAttribute("aria-live", "polite");
  root.classList.add("ve-lookup");
  root.append(box, results);

  let index = null;
  let loading = null;
  let timer = 0;
  const load = () =>
    (loading ??= fetch(new URL("api/lookup.json", ROOT))
      .then((response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        return response.json();
      })
      .then((data) => {
        index = { entries: prepare(data), release: data.release };
        root.dataset.state = "ready";
      })
      .catch((error) => {
        root.dataset.state = "failed";
        results.replaceChildren(element("p", "ve-lookup__status", `The list of errors could not be loaded (${error.message}).`));
      }));
  const show = () => {
    if (!index) return;
    results.replaceChildren(renderResults(index.entries, index.release, box.value));
    root.dispatchEvent(new CustomEvent("lookup:shown")); // for tests and anyone measuring
  };
  box.addEventListener("focus", load, { once: true });
  box.addEventListener("input", (event) => {
    clearTimeout(timer);
    const pasted = event.inputType === "insertFromPaste" || event.inputType === "insertFromDrop";
    const loaded = load();
    timer = setTimeout(() => loaded.then(show), pasted ? 0 : DEBOUNCE_MS);
  });
}

if (typeof document !== "undefined") {
  const root = document.getElementById("lookup");
  if (root) mountBox(root);
}
