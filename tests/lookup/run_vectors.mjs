// The shared vectors through site/assets/lookup.js: every case must read and rank exactly as extractor/lookup.py does.
//
//     node tests/lookup/run_vectors.mjs
//
// Prints each failure, then "N passed, M failed", and exits 1 when any failed. Besides the vectors it pastes
// 1 MB of several kinds of junk, each to be answered within a second without an exception.

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

const vectors = JSON.parse(readFileSync(join(here, "vectors.json"), "utf8"));
const entries = lookup.prepare(vectors.index);

// JSON with object keys sorted: values are compared as Python compares dicts, whatever their order.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function readOf(paste) {
  return {
    raised: paste.raised.map((r) => ({ type: r.type, message: r.message, frames: r.frames.map((f) => [f.path, f.line, f.function]) })),
    version: paste.version,
  };
}

function expectOf(matches) {
  return matches.map((m) => ({ id: m.id, score: m.score, how: m.how, values: m.values, confidence: lookup.confidence(m) }));
}

let passed = 0;
const failures = [];

function check(name, got, want) {
  if (canonical(got) === canonical(want)) return true;
  failures.push(`${name}\n  want ${canonical(want)}\n  got  ${canonical(got)}`);
  return false;
}

for (const c of vectors.cases) {
  let ok;
  try {
    const paste = lookup.readPaste(c.paste);
    ok = check(`${c.name}: read`, readOf(paste), c.read) && check(`${c.name}: expect`, expectOf(lookup.rank(entries, paste)), c.expect);
  } catch (error) {
    failures.push(`${c.name}: ${error.stack}`);
    ok = false;
  }
  if (ok) passed++;
}

const MB = 1_000_000;
let seed = 1;
const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
const printable = " \t\nabcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
const JUNK = {
  "random printable": () => Array.from({ length: MB }, () => printable[Math.floor(random() * printable.length)]).join(""),
  "one long line": () => "ValueError: " + "Unsupported block size: ".repeat(MB / 23),
  "exception lines": () => "ValueError: Unsupported block size: 1\n".repeat(MB / 38),
  "exception lines apart": () => "ValueError: Unsupported block size: 1\n\n".repeat(MB / 39),
  frames: () => 'File "/x/vllm/config/cache.py", line 141, in f\n'.repeat(MB / 48),
  braces: () => "{".repeat(MB),
  "Unicode": () => "\u2028\x85é\u{1d7d8}".repeat(MB / 5),
  "white space": () => " ".repeat(MB),
  "pydantic wrapper": () => "1 validation error for X\n  Value error, " + "a".repeat(MB),
  "parameter suffixes": () => "ValueError: x" + " (parameter=x, value=y".repeat(MB / 22),
};
for (const [name, make] of Object.entries(JUNK)) {
  const text = make();
  const start = performance.now();
  try {
    lookup.rank(entries, lookup.readPaste(text));
    const ms = performance.now() - start;
    if (ms < 1000) passed++;
    else failures.push(`junk, ${name}: ${ms.toFixed(0)} ms`);
  } catch (error) {
    failures.push(`junk, ${name}: ${error.stack}`);
  }
}

for (const failure of failures) console.log(`FAILED ${failure}`);
console.log(`${passed} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
