// The shared vectors through site/assets/lookup.js: every case must read and answer exactly as extractor/lookup.py does.
//
//     node tests/lookup/run_vectors.mjs [VECTORS]
//
// VECTORS is another file of the same shape (tests/test_lookup.py writes one for a real index and the real
// pastes); its "index" may be the path of a built site's api/lookup.json.
//
// Prints each failure, then "N passed, M failed", and exits 1 when any failed. Besides the vectors it checks that
// lookup.js declares lookup.py's constants with the same values, and pastes 1 MB of several kinds of junk, each to
// be answered within a second without an exception.

import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
// lookup.js is an ES module served as .js; outside a package with "type": "module", node needs the .mjs name.
const dir = mkdtempSync(join(tmpdir(), "lookup-"));
copyFileSync(join(here, "../../site/assets/lookup.js"), join(dir, "lookup.mjs"));
const lookup = await import(pathToFileURL(join(dir, "lookup.mjs")).href);
rmSync(dir, { recursive: true });

const vectors = JSON.parse(readFileSync(process.argv[2] ?? join(here, "vectors.json"), "utf8"));
const index = typeof vectors.index === "string" ? JSON.parse(readFileSync(vectors.index, "utf8")) : vectors.index;
const prepared = lookup.prepare(index);

// JSON with object keys sorted: values are compared as Python compares dicts, whatever their order.
function canonical(value) {
  if (value instanceof Map) value = Object.fromEntries(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function pasteOf(c) {
  return typeof c.paste === "string" ? c.paste : c.paste.map(([text, times]) => text.repeat(times)).join("");
}

function readOf(paste) {
  return {
    raised: paste.raised.map((r) => ({ type: r.type, message: r.message, frames: r.frames.map((f) => [f.path, f.line, f.function, f.library]), process: r.process, chained: r.chained, source: r.source })),
    version: paste.version,
    asserts: paste.asserts,
  };
}

function findingOf(f) {
  return { kind: f.kind, id: f.matches.length ? f.matches[0].id : null, outside: f.outside ? f.outside.name : null };
}

function expectOf(paste, answer) {
  const found = answer.finding;
  const at = found ? paste.raised.findIndex((r) => r === found.raised) : -1;
  return {
    kind: answer.kind,
    at: at >= 0 ? at : null,
    outside: found && found.outside ? found.outside.name : null,
    assertion: found && found.assertion ? [found.assertion.path, found.assertion.line, found.assertion.function] : null,
    lines: found ? found.lines ?? [] : [],
    context: answer.context.map(findingOf),
    matches: found
      ? found.matches.map((m) => ({ id: m.id, score: m.score, how: m.how, values: Object.fromEntries(m.values), confidence: m.confidence }))
      : [],
  };
}

let passed = 0;
const failures = [];

function check(name, got, want) {
  if (canonical(got) === canonical(want)) return true;
  failures.push(`${name}\n  want ${canonical(want)}\n  got  ${canonical(got)}`);
  return false;
}

for (const [name, value] of Object.entries(vectors.constants ?? {})) {
  if (check(`constant ${name} (lookup.py's, in lookup.js)`, lookup[name] ?? "missing", value)) passed++;
}

for (const [x, rounded] of vectors.rounding ?? []) {
  if (check(`pyRound(${x}, 4), as Python's round`, lookup.pyRound(x, 4), rounded)) passed++;
}

for (const c of vectors.cases) {
  let ok;
  try {
    const read = lookup.readPaste(pasteOf(c));
    const paste = c.version ? { ...read, version: c.version } : read;
    ok = check(`${c.name}: read`, readOf(read), c.read) && check(`${c.name}: expect`, expectOf(paste, lookup.answer(prepared, paste)), c.expect);
  } catch (error) {
    failures.push(`${c.name}: ${error.stack}`);
    ok = false;
  }
  if (ok) passed++;
}

const MB = 1_000_000;
let seed = 1;
const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
const printable = " \t\n\r\x0b\x0cabcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
const JUNK = {
  "random printable": () => Array.from({ length: MB }, () => printable[Math.floor(random() * printable.length)]).join(""),
  "one long line": () => "ValueError: " + "Unsupported block size: ".repeat(MB / 23),
  "exception lines": () => "ValueError: Unsupported block size: 1\n".repeat(MB / 38),
  "exception lines apart": () => "ValueError: Unsupported block size: 1\n\n".repeat(MB / 39),
  "continued lines": () => "ValueError: Unsupported block size: 1\n" + "  Choose one of 8\n".repeat(MB / 18),
  "process tags": () => "(EngineCore_DP0 pid=1) ValueError: Unsupported block size: 1\n(APIServer pid=2) x\n".repeat(MB / 80),
  frames: () => 'File "/x/vllm/config/cache.py", line 141, in f\n'.repeat(MB / 48),
  "dotted names": () => "a." .repeat(MB / 2) + "Error: x",
  "words, no spaces": () => "`" + "a".repeat(MB) + ": x",
  braces: () => "{".repeat(MB),
  "carriage returns": () => "\r".repeat(MB) + "x",
  Unicode: () => "\u2028\x85é\u{1d7d8}\ufeff".repeat(MB / 6),
  "white space": () => " ".repeat(MB),
  "pydantic wrapper": () => "1 validation error for X\n  Value error, " + "a".repeat(MB),
  "parameter suffixes": () => "ValueError: x" + " (parameter=x, value=y".repeat(MB / 22),
  "many rare words": () => "ValueError: " + "unsupported block size choose configuration tensor parallel heads ".repeat(MB / 66),
};
for (const [name, make] of Object.entries(JUNK)) {
  const text = make();
  const start = performance.now();
  try {
    lookup.answer(prepared, lookup.readPaste(text));
    const ms = performance.now() - start;
    if (ms < 1000) passed++;
    else failures.push(`junk, ${name}: ${ms.toFixed(0)} ms`);
  } catch (error) {
    failures.push(`junk, ${name}: ${error.stack}`);
  }
}

const SHOWN = 3000; // characters of one failure shown: some pastes are long
for (const failure of failures) console.log(`FAILED ${failure.length > SHOWN ? failure.slice(0, SHOWN) + " ..." : failure}`);
console.log(`${passed} passed, ${failures.length} failed`);
process.exitCode = failures.length ? 1 : 0; // not process.exit(): it would cut off output still on its way down a pipe
