// Looking up a pasted error: extractor/lookup.py's algorithm, function for function, and the box on the home page.
//
// tests/lookup/vectors.json keeps the two in step (tests/lookup/run_vectors.mjs runs them here, and checks
// that the constants below are Python's). Python's regular expressions are Unicode-aware where JavaScript's
// are not, Python counts code points where JavaScript counts UTF-16 units, and Python's `$` also matches
// before a final newline, so all of these are spelled out below wherever a result depends on them.

// The same names and values as in extractor/lookup.py.
export const INDEX_FORMAT = 3;
export const MAX_PASTE = 200_000; // characters (code points) read from a paste; the end of a log is what matters
export const MAX_MESSAGE = 4_000; // characters of one message matched: the rest is values and lists
export const MAX_CONTINUATION = 40; // lines a message may continue over
export const MAX_STEPS = 5000; // exact-matcher steps per template: a pathological paste gives up instead of hanging
export const SHORTLIST = 40; // candidates aligned word by word: those sharing the most information with the message
export const RARE = 400; // words of at least this weight (centibits) find candidates
export const ENOUGH = 4000; // information (centibits) for full confidence
export const OUTSIDE_DISCOUNT = 4; // words of a message outside the matched span count a quarter
export const CONFIDENT = { high: 0.9, medium: 0.5 };
export const EXACT_LETTERS = 12; // literal characters an exact match needs to count on its own
export const EXACT_BONUS = 0.35;
export const CUT_VALUE = 40; // characters a message cut short inside a value may end with: longer, it is not a value
export const CUT_SAID = 40; // ... unless this many literal characters of the template came before it (a long list, cut)
export const EXACTLY = ["exact", "truncated", "extended"]; // the template's literal text in order, as far as the message goes
export const HOW_RANK = { exact: 3, truncated: 2, extended: 2, similar: 1, frame: 0 };
export const CLOSE = 0.05; // a runner-up this near makes an answer no better than medium
export const WRAPPERS = { points: 1, embeds: 2 }; // an error pointing at one printed earlier; one carrying the caught one's text
// score_entries: the last vLLM frame is a site (its line, or its function), or neither while the traceback ends there.
export const FRAME_BONUS = { exact: 0.5, function: 0.05, elsewhere: -0.15 };
export const TYPE_BONUS = { agrees: 0.03, disagrees: -0.1 }; // score_entries: the pasted type is (not) the error's
export const RELEASE_BONUS = 0.04; // score_entries: the error is in the release the paste names

// Python's \s (str.isspace), which JavaScript's \s is not (it lacks \x1c-\x1f and \x85, and has \ufeff).
const SPACE_CODES = [0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000];
const SPACES = new Set(SPACE_CODES);
const S_ = SPACE_CODES.map((c) => "\\u" + c.toString(16).padStart(4, "0")).join("");
const END = String.raw`(?=\n?$)`; // Python's `$`: the end, or before a newline that ends the text

// --- Python's strings, in JavaScript -----------------------------------------------------------------

/** Python's str.strip(): Unicode white space off both ends. */
export function strip(text) {
  let start = 0;
  let end = text.length;
  while (start < end && SPACES.has(text.charCodeAt(start))) start++;
  while (end > start && SPACES.has(text.charCodeAt(end - 1))) end--;
  return text.slice(start, end);
}

function isSpace(ch) {
  return ch !== undefined && SPACES.has(ch.charCodeAt(0));
}

function lstrip(text) {
  let start = 0;
  while (start < text.length && SPACES.has(text.charCodeAt(start))) start++;
  return text.slice(start);
}

/** Python's text.rstrip(ch) for one character: a loop, where a regex backtracks over long runs. */
function rstripChar(text, ch) {
  let end = text.length;
  while (end > 0 && text[end - 1] === ch) end--;
  return end === text.length ? text : text.slice(0, end);
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

/** Python's text[:n]. */
function leading(text, n) {
  return text.length <= n ? text : text.slice(0, advance(text, 0, n));
}

/** Python's text[-n:]. */
function trailing(text, n) {
  if (text.length <= n) return text;
  let at = text.length;
  while (n-- > 0 && at > 0) at -= at >= 2 && isPair(text, at - 2) ? 2 : 1;
  return text.slice(at);
}

// Python's find: -1, not the end, when the start lies past the end.
function pyFind(text, sub, start) {
  return start > text.length ? -1 : text.indexOf(sub, start);
}

/** Python's round(x, digits): the nearest number of so many decimals, ties to even. */
export function pyRound(x, digits = 4) {
  const a = Math.abs(x);
  let r;
  // A double is exactly halfway between two such decimals when a * 2^(digits + 1) is an odd integer.
  const half = 2 ** digits;
  if (Number.isInteger(a * half * 2) && !Number.isInteger(a * half)) {
    const scale = 10 ** digits;
    const low = Math.floor(a * scale); // exact: a is k + 1/2 units of the last decimal
    r = (low % 2 === 0 ? low : low + 1) / scale;
  } else {
    r = Number(a.toFixed(digits)); // exact decimal expansion, then the nearest double, as Python does
  }
  return x < 0 ? -r : r;
}

// Python's comparison of strings, by code point.
function compare(a, b) {
  if (a === b) return 0;
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i].codePointAt(0) - y[i].codePointAt(0);
  }
  return x.length - y.length;
}

/** Python's ascii_lower: lower case for ASCII letters only. */
export function asciiLower(text) {
  return text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

export function fold(text) {
  return strip(text.replace(SPACE_RUN, " "));
}

const SPACE_RUN = new RegExp(`[${S_}]+`, "g");
const WORD = /[A-Za-z0-9]+/g;
const DIGITS = /^[0-9]+$/;

/** The words matching compares: runs of ASCII letters and digits, lower case, no bare numbers. */
export function words(text) {
  return (text.match(WORD) ?? []).map(asciiLower).filter((w) => w.length > 1 && !DIGITS.test(w));
}

export function literalText(parts) {
  return parts.filter((p) => typeof p === "string").join(" ");
}

// --- reading a paste --------------------------------------------------------------------------------

const QUOTED = /["\u201c]([^"\u201c\u201d\n]{20,})["\u201d]/g; // a message quoted in prose
const PYDANTIC_DICT = /['"]msg['"]:[ \t]*(['"])(?:Value|Assertion) error, ((?:\\.|(?!\1)[^\n])*)\1/;
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]|\[(?:[0-9]{1,2};)*[0-9]{1,2}m/g; // colours, also with the escape lost ("[0;36m")
const PROCESS = /^[ \t]*\(([A-Za-z_][A-Za-z0-9_-]*(?: [A-Za-z0-9_=-]+)?) pid=[0-9]+(?:, ip=[0-9A-Fa-f.:]+)?\)[ \t]?/;
// Log prefixes, peeled off the start of each line in any order (the same list, in the same order, as Python's).
const PREFIXES = [
  new RegExp(String.raw`^[ \t]*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[ \t]+[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?[ \t]+(?:\[?[^\]${S_}]*\][ \t]?)?`),
  /^[ \t]*\[rank[0-9]+\]:[ \t]?/,
  /^[ \t]*[A-Za-z0-9_.-]+-[0-9]+[ \t]+\|[ \t]?/,
  /^[ \t]*\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?\]?[ \t]+(?:\|[ \t]*)?/,
  /^[ \t]*[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [A-Za-z0-9_.-]+ [A-Za-z0-9_.@/-]+(?:\[[0-9]+\])?:[ \t]?/,
  /^[ \t]*(?:stdout|stderr) [FP] /,
  /^[ \t]*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?::|[ \t]+-|[ \t]*\|)[ \t]+/,
];
const FRAME = new RegExp(String.raw`File "([^"]+)", line ([0-9]+), in ([^${S_}]+)`);
const NAME = String.raw`(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_]?[A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Iteration)`;
// Python's `.` (anything but \n) is [^\n] here: JavaScript's also stops at \r, \u2028 and \u2029.
const EXCEPTION = new RegExp(String.raw`(?:^|[^A-Za-z0-9_.])(${NAME})\x60?:(?:[ \t\u00a0]+([^\n]*))?${END}`);
const BARE_EXCEPTION = new RegExp(String.raw`^[${S_}]*(${NAME})[${S_}]*${END}`);
const ASSERT_LINE = /^assert(?![A-Za-z0-9_])/;
// Errors Python itself raises where an operation fails (`len(x)` of an object without one): at a line of a
// library's own code that is no `raise`, the library's code failed there.
export const PYTHON_RAISES = ["TypeError", "AttributeError", "IndexError", "KeyError", "NameError", "UnboundLocalError", "ZeroDivisionError", "RecursionError"];
const ASSERT_TEXT = new RegExp(String.raw`(?:^|[^A-Za-z0-9_.])assert[ \t]+([^${S_},][^\n]*)${END}`); // `assert x is not None` anywhere in a line
export const MAX_ASSERT_LINES = 10; // lines an expression in an open parenthesis may continue over
export const ASSERT_LETTERS = 16; // an expression this long is distinctive on its own; a shorter one needs a frame to agree
const NOT_KEY = new RegExp(`[${S_}()]+`, "g");

/** An expression as the lookup compares it (facts.assert_key): no spaces, no parentheses, double quotes. */
export function assertKey(expression) {
  return expression.replaceAll("'", '"').replace(NOT_KEY, "");
}
const CHAIN = new RegExp(String.raw`^(?:During handling of the above exception, another exception occurred:|The above exception was the direct cause of the following exception:)[${S_}]*${END}`);
const PYDANTIC = new RegExp(String.raw`(?:Value|Assertion) error, ([^]*?)(?: \[type=[A-Za-z0-9_]+, input_value=[^]*)?${END}`);
const VALIDATION_SUFFIX = new RegExp(String.raw` \(parameter=[^,()]*, value=[^]*\)${END}`);
// Python's \S. is [^\s][^\n]* here: JavaScript's [^...] takes half of an astral character, and [^\n]* the rest.
const SAID_ERROR = new RegExp(String.raw`(?:^|[${S_},;(])(?:[Ee]rror|ERROR|[Ee]xception)[ \t]*:[ \t]*([^${S_}/][^\n]*)${END}`);
// "... NCCL error: <message>": the library's name is part of the message.
const NAMED_ERROR = new RegExp(String.raw`(?:^|[^A-Za-z0-9_])([A-Z][A-Z0-9]+ (?:error|Error|ERROR)[ \t]*:[ \t]*[^${S_}/][^\n]*)${END}`);
// An exception as Python prints it inside a container: {'error': ValueError('...')}.
const REPR = new RegExp(String.raw`(?:^|[^A-Za-z0-9_.])(${NAME})\((['"])((?:\\[^\n]|(?!\2)[^\n])+?)\2[,)]`, "g");
// Where a message stops: a Markdown fence, CJK prose. A message the reporter cut short ends with "...".
const STOP = /```|[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]/;
const ELLIPSIS = / ?(?:\.\.\.|\u2026)$/;
const STATUS = /^Error code: [0-9]{3} - /; // how openai-python begins an error response it raises
const JSON_MESSAGE = new RegExp(String.raw`"(?:message|detail)"[${S_}]*:[${S_}]*"((?:[^"\\]|\\[^\n])*)"`);
// The same response printed as a Python dict; and "ERROR [request 12] <message>" log lines.
const PY_MESSAGE = new RegExp(String.raw`'(?:message|detail)'[${S_}]*:?[${S_}]*'((?:[^'\\]|\\[^\n])*)'`);
// vLLM 0.5 - 0.6.3's worker log: "Exception in worker W while processing method m: <message>, <traceback>"
const WORKER_LOG = new RegExp(String.raw`while processing method [^${S_}:]+: ([^${S_}][^\n]*?), Traceback \(most recent call last\):[ \t]*${END}`);
const LOGGED_ERROR = new RegExp(String.raw`(?:^|[${S_}|])ERROR[ \t]+\[[^\]\n]*\][ \t]+([^${S_}][^\n]*)${END}`);
const ARGPARSE = new RegExp(String.raw`^argument [^${S_}:]+(?:/[^${S_}:]+)?: `);
const UNDERSCORE_BOLD = /^__([^_ ][^]*[.!?)\]'"])__$/;
const QUOTED_ITEM = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`;
const TUPLE_ITEM = new RegExp(QUOTED_ITEM + String.raw`|[^'",()]+`, "g");
// raise E("text ", f"more {x}") prints its arguments as a tuple: ('text ', 'more 1')
const TUPLE_REPR = new RegExp(String.raw`^\((?:` + QUOTED_ITEM + String.raw`)(?:, ?(?:` + TUPLE_ITEM.source + String.raw`))+,?\)$`);
const VERSION = /vllm(?:[ _-]?api[ _-]?server)?(?:[ _-]?version)?[ =:/_-]*v?([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)/;

/** A log line without its prefixes: {process, prefix, text}. */
export function peel(line) {
  let process = "";
  const peeled = [];
  let changed = true;
  while (changed) {
    changed = false;
    const tag = PROCESS.exec(line);
    if (tag) {
      process = process || tag[1];
      line = line.slice(tag[0].length);
      changed = true;
    }
    for (const prefix of PREFIXES) {
      const found = prefix.exec(line);
      if (found && found[0].length > 0) {
        peeled.push(strip(found[0]));
        line = line.slice(found[0].length);
        changed = true;
      }
    }
  }
  return { process, prefix: peeled.join(" "), text: line };
}

/** `/usr/lib/python3/site-packages/vllm/config/model.py` -> `vllm/config/model.py`. */
export function vllmPath(file) {
  file = file.replaceAll("\\", "/");
  const at = file.lastIndexOf("/vllm/");
  return at >= 0 ? file.slice(at + 1) : file.startsWith("vllm/") ? file : "";
}

const CODE = new RegExp(String.raw`^[${S_}]*(?:raise|assert)(?:[${S_}]|\(|$)`); // a line of code, where a log prefix ate the indent that tells it
const RAISE_NEW = /^raise (?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*\(/; // `raise ValueError(`, `raise errors.ConfigError(`: a new exception
const LIBRARY = /\/(?:site|dist)-packages\/([A-Za-z0-9_]+)\//; // the installed package a frame's file is in

function frameOf(found) {
  const number = found[2];
  const library = LIBRARY.exec(found[1].replaceAll("\\", "/"));
  return { path: vllmPath(found[1]), line: number.length <= 9 ? Number.parseInt(number, 10) : 0, function: found[3],
    library: library && library[1] !== "vllm" ? library[1] : "" };
}

/** [type, message] of an exception line: `Name: message` anywhere in the line, the first such name; or null. */
export function exceptionAt(text) {
  const worker = WORKER_LOG.exec(text);
  if (worker) return ["", worker[1]];
  const found = EXCEPTION.exec(text);
  if (found) return [found[1], found[2] ?? ""];
  const bare = BARE_EXCEPTION.exec(text);
  if (bare) return [bare[1], ""];
  // "... NCCL error: <message>", "... I got an error: <message>", "Leave chat, error: <message>"
  const said = NAMED_ERROR.exec(text) ?? SAID_ERROR.exec(text) ?? LOGGED_ERROR.exec(text);
  return said ? ["", said[1]] : null;
}

/**
 * The paste's lines without their prefixes. A line with no prefix of its own after a tagged one belongs to
 * it (a long line wrapped when copied); a line holding several frames (newlines lost when copied) is split
 * before each.
 */
function pasteRows(text) {
  const rows = [];
  for (const line of trailing(text, MAX_PASTE).replace(ANSI, "").split("\n")) {
    let row = peel(rstripChar(line, "\r"));
    const previous = rows[rows.length - 1];
    if (previous && !row.prefix && !row.process && !FRAME.test(previous.text) && !FRAME.test(row.text) && FRAME.test(previous.text + row.text)) {
      rows[rows.length - 1] = { process: previous.process, prefix: previous.prefix, text: previous.text + row.text }; // a frame wrapped mid-word: `", l` / `ine 743, in f`
      continue;
    }
    if (previous && !row.process && !row.prefix && previous.process && strip(row.text)) {
      row = { process: previous.process, prefix: previous.prefix, text: row.text };
    }
    const pieces = row.text.split('File "');
    if (pieces.length > 2) {
      pieces.forEach((piece, k) => {
        if (strip(piece)) rows.push({ process: row.process, prefix: row.prefix, text: k === 0 ? piece : 'File "' + piece });
      });
    } else {
      rows.push(row);
    }
  }
  return rows;
}

/**
 * The exceptions a paste shows, in order, each with its message and the frames above it: {raised, version}.
 * The lines of each process (its `(Name pid=N)` tag) are read on their own.
 */
export function readPaste(text) {
  const rows = pasteRows(text);
  let version = null;
  for (const row of rows) {
    const m = VERSION.exec(asciiLower(row.text));
    if (m) {
      version = m[1];
      break;
    }
  }
  const streams = new Map();
  rows.forEach((row, k) => {
    if (!streams.has(row.process)) streams.set(row.process, []);
    streams.get(row.process).push(k);
  });
  const found = [];
  for (const [process, at] of streams) {
    let frames = [];
    let chained = false;
    let source = "";
    let k = 0;
    while (k < at.length) {
      const row = rows[at[k]];
      if (CHAIN.test(strip(row.text))) chained = found.length > 0 && found[found.length - 1][1].process === process;
      const frame = FRAME.exec(row.text);
      let rest = row.text;
      if (frame) {
        frames.push(frameOf(frame));
        rest = row.text.slice(frame.index + frame[0].length);
        source = "";
      } else if (k && FRAME.test(rows[at[k - 1]].text) && underFrame(row.text, rows[at[k - 1]].text)) {
        source = strip(row.text); // the source line Python prints under a frame: `raise RuntimeError(f"NCCL error: ...")`
        k++;
        continue;
      }
      const exc = exceptionAt(rest);
      if (exc === null) {
        for (const r of reprs(rest, frames, process)) found.push([at[k], r]);
        k++;
        continue;
      }
      const message = [exc[1]];
      let j = k + 1;
      const bare = BARE_EXCEPTION.test(rest); // `AssertionError` alone: no message, what follows is other output
      while (!bare && j < at.length && j - k <= MAX_CONTINUATION && continues(rows[at[j]], row.prefix)) {
        message.push(strip(rows[at[j]].text));
        j++;
      }
      for (const r of reprs(exc[1], [], process)) found.push([at[k], r]); // the exception it quotes came first
      found.push([at[k], { type: exc[0], message: unwrap(message.join("\n")), frames, process, chained, source: frames.length ? source : "" }]);
      frames = [];
      chained = false;
      source = "";
      k = j;
    }
    // The traceback stops at an `assert` of vLLM's: the paste ends before its AssertionError.
    if (frames.length && ASSERT_LINE.test(source)) found.push([at[at.length - 1], { type: "AssertionError", message: "", frames, process, chained, source }]);
  }
  found.sort((a, b) => a[0] - b[0]);
  const raised = found.map((f) => f[1]);
  const asserts = [];
  rows.forEach((row, k) => {
    if (ASSERT_TEXT.test(row.text)) asserts.push(assertText(rows, k));
  });
  if (!raised.length) {
    // not the source line Python prints under a frame
    const body = rows.filter((row, k) => strip(row.text) && !(k && FRAME.test(rows[k - 1].text) && underFrame(row.text, rows[k - 1].text))
      && !FRAME.test(row.text) && !lstrip(row.text).startsWith("Traceback")).map((row) => row.text).join("\n");
    const frames = [];
    for (const row of rows) {
      const m = FRAME.exec(row.text);
      if (m) frames.push(frameOf(m));
    }
    const response = JSON_MESSAGE.exec(body);
    const printed = PY_MESSAGE.exec(body);
    // An API response: {"message": "...", "type": "BadRequestError", ...}; its "type" is OpenAI's, not a class.
    // Prose in another script around the message (CJK): the longest stretch without it is the message.
    const prose = body.split(STOP).reduce((best, piece) => (words(piece).length > words(best).length ? piece : best));
    const message = response ? jsonString(response[1]) : printed ? printed[1].replaceAll("\\'", "'") : prose;
    raised.push({ type: "", message: unwrap(message), frames, process: "", chained: false, source: "" });
    if (!response && !printed) {
      let quoted = "";
      for (const m of body.matchAll(QUOTED)) if (m[1].length > quoted.length) quoted = m[1];
      // prose quoting the error: "... fails with "<the message>" when ..."
      if (strip(quoted).split(/\s+/).length >= 3) raised.push({ type: "", message: unwrap(quoted), frames, process: "", chained: false, source: "" });
    }
  }
  return { raised, version, asserts };
}

const count = (text, ch) => text.split(ch).length - 1;

/** What follows `assert ` on row k, with the rows it continues over while a parenthesis is open (lookup.assert_text). */
function assertText(rows, k) {
  const parts = [ASSERT_TEXT.exec(rows[k].text)[1]];
  for (const row of rows.slice(k + 1, k + 1 + MAX_ASSERT_LINES)) {
    const joined = parts.join("");
    if (count(joined, "(") <= count(joined, ")")) break;
    parts.push(strip(row.text));
  }
  return parts.join(" ");
}

/** The exceptions a line shows as Python prints them in a container: `{'error': ValueError('...')}`. */
function reprs(text, frames, process) {
  return [...text.matchAll(REPR)].map((r) => ({ type: r[1], message: unwrap(r[3].replaceAll("\\" + r[2], r[2])), frames: [...frames], process, chained: false, source: "" }));
}

/** Python's len(text) - len(text.lstrip(" \t")). */
/** Whether a line below a frame is the source line Python prints there (indented more, or code). */
function underFrame(text, frame) {
  return indent(text) > indent(frame) || CODE.test(text);
}

function indent(text) {
  let n = 0;
  while (n < text.length && (text[n] === " " || text[n] === "\t")) n++;
  return n;
}

/** A JSON string's text, as Python's json.loads reads it; the raw text where it is no JSON string. */
function jsonString(raw) {
  try {
    return JSON.parse('"' + raw + '"');
  } catch {
    return raw;
  }
}

/** Whether a line goes on with the message above it: the same log record, and not a new part of a traceback. */
function continues(row, prefix) {
  const text = strip(row.text);
  if (row.prefix !== prefix || !text || FRAME.test(text) || CHAIN.test(text) || text.startsWith("Traceback")) return false;
  return exceptionAt(text) === null;
}

/** The message vLLM raised, out of pydantic's report and without VLLMValidationError's suffix. */
export function unwrap(message) {
  const listed = PYDANTIC_DICT.exec(message);
  // pydantic's errors as a list of dicts, printed inside an API response: {'msg': 'Value error, ...'}
  if (listed) message = listed[2].replaceAll("\\'", "'");
  else if (STATUS.test(message)) {
    // an HTTP client's error: "Error code: 400 - {'error': {'message': '<vLLM's message>', ...}}"
    const printed = PY_MESSAGE.exec(message);
    const response = JSON_MESSAGE.exec(message);
    if (printed) message = printed[1].replaceAll("\\'", "'");
    else if (response) message = jsonString(response[1]);
  }
  const pydantic = PYDANTIC.exec(message);
  const reported = pydantic && message.slice(0, advance(message, pydantic.index, 40)).toLowerCase().includes("validation error");
  if (reported || message.startsWith("Value error, ") || message.startsWith("Assertion error, ")) {
    message = pydantic ? pydantic[1] : message;
  }
  message = fold(message.split(STOP, 1)[0]).replace(ARGPARSE, ""); // argparse prints a flag's ArgumentTypeError as "argument --flag: <message>"
  if (TUPLE_REPR.test(message)) message = joinedTuple(message);
  const bold = UNDERSCORE_BOLD.exec(message);
  if (bold) message = bold[1]; // Markdown's other bold, `__text__`, around a message that ends in punctuation (not a `__dunder__`)
  // The suffix ends the message: without a final ")" the regex could only fail, slowly on a long paste.
  if (message.endsWith(")")) message = message.replace(VALIDATION_SUFFIX, "");
  return message.replace(ELLIPSIS, "");
}

/** A tuple of a raise's arguments, printed: its strings joined as their author meant them to read. */
export function joinedTuple(message) {
  let text = "";
  for (const found of message.slice(1, -1).matchAll(TUPLE_ITEM)) {
    let item = strip(found[0]);
    if (!item) continue;
    if (item[0] === "'" || item[0] === '"') item = item.slice(1, -1).replace(/\\(.)/gu, (_, c) => ("nt".includes(c) ? " " : c));
    text += !text || isSpace(text[text.length - 1]) || isSpace(item[0]) ? item : " " + item;
  }
  return fold(text);
}

// --- matching ---------------------------------------------------------------------------------------

/**
 * Python's re.search syntax for the index's patterns of errors outside vLLM: \s, \d and \w are Python's
 * (Unicode) classes, `.` is anything but a newline, `$` also matches before a final newline, and escaped
 * punctuation is plain. Compiled with the u flag where it reads so, else as written; null if neither.
 */
export function pythonRegExp(source) {
  const W = String.raw`\p{L}\p{N}_`;
  const inside = { s: S_, d: String.raw`\p{Nd}`, w: W };
  const outside = { s: `[${S_}]`, S: `[^${S_}]`, d: String.raw`\p{Nd}`, D: String.raw`\P{Nd}`, w: `[${W}]`, W: `[^${W}]`,
    b: `(?:(?<=[${W}])(?![${W}])|(?<![${W}])(?=[${W}]))`, B: `(?:(?<=[${W}])(?=[${W}])|(?<![${W}])(?![${W}]))`,
    A: "^", Z: "(?![^])" };
  let out = "";
  let klass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === "\\" && i + 1 < source.length) {
      const n = source[++i];
      if (klass ? n in inside : n in outside) out += klass ? inside[n] : outside[n];
      else if (/[A-Za-z0-9]/.test(n)) out += "\\" + n; // \n, \t, \x41, \u0041, back references: the same
      else if ("^$\\.*+?()[]{}|/".includes(n) || (klass && n === "-")) out += "\\" + n;
      else out += n; // \' \" \: \_ ...: plain, which the u flag insists on
    } else if (klass) {
      out += c;
      if (c === "]") klass = false;
    } else if (c === "[") {
      out += c;
      klass = true;
      if (source[i + 1] === "^") out += source[++i];
      if (source[i + 1] === "]") out += "\\" + source[++i]; // Python's `[]...]`: a literal ] first
    } else if (c === ".") {
      out += "[^\\n]";
    } else if (c === "$") {
      out += END;
    } else if (c === "(" && source.startsWith("(?P<", i)) {
      out += "(?<";
      i += 3;
    } else if (c === "(" && source.startsWith("(?P=", i)) {
      const close = source.indexOf(")", i);
      out += `\\k<${source.slice(i + 4, close)}>`;
      i = close;
    } else {
      out += c;
    }
  }
  for (const [pattern, flags] of [[out, "u"], [source, ""]]) {
    try {
      return new RegExp(pattern, flags);
    } catch {
      // the next reading
    }
  }
  return null;
}

/** Match a message against template parts: ["full", "truncated" or "extended", literal characters, values] or null. */
export function matchSteps(parts, text, literals = null) {
  literals = literals && literals.length ? literals : foldedLiterals(parts);
  let steps = 0;

  function at(pi, ti, values, said = 0) {
    if (++steps > MAX_STEPS) return null;
    if (pi === parts.length) return ti === text.length ? ["full", 0, values] : ["extended", 0, values];
    let lit = literals[pi];
    if (lit !== null) {
      // an empty value between two spaces, which folding made one
      if (lit[0] === " " && ti && text[ti - 1] === " " && !text.startsWith(lit, ti)) lit = lit.slice(1);
      if (text.startsWith(lit, ti)) {
        const rest = at(pi + 1, ti + lit.length, values, said + codePoints(strip(lit)));
        return rest ? [rest[0], rest[1] + codePoints(strip(lit)), rest[2]] : null;
      }
      const tail = text.slice(ti);
      if (tail && lit.startsWith(tail) && strip(tail).length >= 1) return ["truncated", codePoints(strip(tail)), values];
      return null;
    }
    const name = parts[pi][0];
    if (pi === parts.length - 1) return ["full", 0, new Map(values).set(name, text.slice(ti))];
    const next = literals[pi + 1];
    let j = next ? pyFind(text, next, ti) : ti;
    if (next && next[0] === " " && ti && text[ti - 1] === " " && text.startsWith(next.slice(1), ti)) j = ti; // an empty value between two spaces, which folding made one
    let fallback = null; // a match cut short or with text over: the one with the most literal text, while a whole one is looked for
    while (j >= 0) {
      const found = at(pi + 1, j, new Map(values).set(name, text.slice(ti, j)), said);
      if (found && found[0] === "full") return found;
      if (found && (fallback === null || found[1] > fallback[1])) fallback = found;
      j = next !== null ? pyFind(text, next, j + 1) : -1; // two placeholders meet: one split is enough
    }
    if (fallback) return fallback;
    const longest = said < CUT_SAID ? CUT_VALUE : Infinity;
    for (let cut = Math.min(next === null ? 0 : next.length, text.length - ti); cut > 0; cut--) {
      // the message stops inside the next literal
      // after a value of a value's length
      if (text.endsWith(next.slice(0, cut))) {
        const value = text.slice(ti, text.length - cut);
        return codePoints(value) <= longest ? ["truncated", codePoints(strip(next.slice(0, cut))), new Map(values).set(name, value)] : null;
      }
    }
    const rest = codePoints(text.slice(ti));
    if (rest > 0 && rest <= longest) return ["truncated", 0, new Map(values).set(name, text.slice(ti))]; // the message stops inside a value
    return null;
  }

  if (!parts.length) return null;
  return at(0, 0, new Map());
}

/** Each literal part with white space folded, keeping one space where it meets a placeholder, without backticks (Markdown eats them: pastes lose them). */
export function foldedLiterals(parts) {
  return parts.map((p, k) => {
    if (typeof p !== "string") return null;
    p = unmark(p); // Markdown eats backticks: pastes lose them
    const lead = p && SPACES.has(p.charCodeAt(0)) && k > 0 ? " " : "";
    const trail = p && SPACES.has(p.charCodeAt(p.length - 1)) && k < parts.length - 1 ? " " : "";
    return fold(p) ? lead + fold(p) + trail : p ? " " : "";
  });
}

/**
 * How a message fits a template's literal text in order: ["exact", values] (all of it; values a Map in the
 * template's order), ["truncated", {}] (the message stops inside it), ["extended", {}] (all of it, then more
 * text), or ["similar", {}] (words only).
 */
export function matchHow(parts, text, literals = null) {
  const found = matchSteps(parts, unmark(text), literals);
  if (found === null || (found[0] === "truncated" && found[1] < EXACT_LETTERS)) return ["similar", new Map(), 0]; // cut short before it says much
  if (found[0] === "full") return ["exact", found[2], found[1]];
  return [found[0] === "truncated" ? "truncated" : "extended", new Map(), found[1]];
}

/** Without Markdown's marks, which pastes gain or lose: `code` and **bold**. */
export function unmark(text) {
  return text.replaceAll("\x60", "").replaceAll("**", "");
}

/** How many of a template's words its first `chars` literal characters (as matchSteps counts them) hold. */
export function prefixWords(parts, chars) {
  let n = 0;
  for (const p of parts) {
    if (typeof p !== "string") continue;
    const lit = Array.from(fold(unmark(p)));
    n += words(lit.slice(0, Math.max(0, chars)).join("")).length;
    chars -= lit.length;
    if (chars <= 0) break;
  }
  return n;
}

/** The index prepared once for matching many pastes: entries (sites with their paths), word weights and postings, releases, outside errors. */
export function prepare(index) {
  const vocabulary = new Map(Object.entries(index.v)); // a Map: a word such as "constructor" is no key of {}
  const files = index.files; // the sites' paths, which each error's "s" names by their place here
  const entries = [];
  const postings = new Map();
  for (const error of index.errors) {
    const sites = error.s.map(([p, line, fn]) => [files[p], line, fn]);
    for (const parts of [error.p, ...(error.a ?? [])]) { // the template, then the other messages its code builds
      const k = entries.length;
      const toks = words(literalText(parts));
      const ws = toks.map((t) => vocabulary.get(t) ?? 0);
      entries.push({
        id: error.i,
        types: error.t,
        parts,
        literals: foldedLiterals(parts),
        words: toks,
        vocabulary: new Set(toks), // the same, as a set
        weights: ws,
        total: ws.reduce((a, b) => a + b, 0),
        letters: parts.reduce((n, p) => n + (typeof p === "string" ? codePoints(fold(p)) : 0), 0), // the literal text's length, folded
        holes: parts.filter((p) => typeof p !== "string").length, // placeholders
        sites,
        title: error.n,
        spans: error.r,
        wrapper: error.w ?? 0, // 0, or WRAPPERS' kind
      });
      for (const t of new Set(toks)) {
        if (!postings.has(t)) postings.set(t, []);
        postings.get(t).push(k);
      }
    }
  }
  const outside = (index.o ?? []).map((known) => ({
    ...known,
    typePattern: known.type ? pythonRegExp(known.type) : null,
    messagePattern: known.message ? pythonRegExp(known.message) : null,
  }));
  const asserts = new Map(); // expression key -> [path, function, [[first, last, line], ...]] of each assert without a message
  for (const [key, p, fn, flat] of index.b ?? []) {
    const spans = [];
    for (let k = 0; k < flat.length; k += 3) spans.push(flat.slice(k, k + 3));
    if (!asserts.has(key)) asserts.set(key, []);
    asserts.get(key).push([files[p], fn, spans]);
  }
  // Information (centibits) that words must carry to be in one template of the index by chance: "NCCL error: {e}".
  const singlesOut = Math.floor(100 * Math.log2(Math.max(2, index.errors.length)));
  const causes = new Map(index.errors.filter((e) => e.c).map((e) => [e.i, e.c])); // a wrapper's most reported root causes
  return { entries, vocabulary, postings, releases: index.releases, release: index.release, outside, singlesOut, asserts, causes };
}

export function confidence(match) {
  let level = "low";
  for (const [name, floor] of Object.entries(CONFIDENT)) {
    if (match.score >= floor) {
      level = name;
      break;
    }
  }
  // High needs no close runner-up, a type that does not contradict, and the literal text in order or a frame that agrees:
  // shared words alone are no more than medium.
  if (level === "high" && (match.close || match.typeAgrees === false || (!EXACTLY.includes(match.how) && !match.frameAgrees))) return "medium";
  return level;
}

export class Match {
  // close: the next candidate scores within CLOSE of it
  constructor(id, title, score, how, values, information, typeAgrees, frameAgrees, wrapper, close = false) {
    Object.assign(this, { id, title, score, how, values, information, typeAgrees, frameAgrees, wrapper, close });
  }

  get confidence() {
    return confidence(this);
  }
}

/** The most information of `a`'s words that `b` holds in the same order (a weighted longest common subsequence). */
/** The last row of the weighted longest-common-subsequence table: for each prefix of `b`, the most information. */
function lcsRow(pairs, b) {
  let prev = new Array(b.length + 1).fill(0);
  for (const [t, w] of pairs) {
    const cur = new Array(b.length + 1).fill(0);
    for (let j = 0; j < b.length; j++) {
      const best = t === b[j] ? prev[j] + w : 0;
      cur[j + 1] = Math.max(best, prev[j + 1], cur[j]);
    }
    prev = cur;
  }
  return prev;
}

/**
 * The most information of `a`'s words that `b` holds in the same order (a weighted longest common subsequence),
 * and the tightest stretch of `b` that holds it: [information, first, last] positions.
 */
export function aligned(a, wa, b) {
  const keep = new Set(b);
  const pairs = [];
  for (let i = 0; i < Math.min(a.length, wa.length); i++) if (keep.has(a[i])) pairs.push([a[i], wa[i]]);
  const mine = new Set(pairs.map((p) => p[0]));
  const at = [];
  b.forEach((t, j) => {
    if (mine.has(t)) at.push(j);
  });
  b = at.map((j) => b[j]);
  if (!pairs.length || !b.length) return [0, 0, -1];
  const row = lcsRow(pairs, b);
  const best = row[b.length];
  let end = 0;
  while (row[end] !== best) end++; // the shortest prefix that holds it all
  const back = lcsRow([...pairs].reverse(), b.slice(0, end).reverse());
  let size = 0;
  while (back[size] !== best) size++; // and the shortest suffix of that prefix
  return [best, at[end - size], at[end - 1]];
}

/** `v0.8.5.post1` -> [0n, 8n, 5n, 1n]: releases compare by their numbers (as big integers, as Python's int). */
export function versionKey(version) {
  return (version.match(/[0-9]+/g) ?? []).map((n) => BigInt(n));
}

// Python's comparison of lists: element by element, then the shorter first.
function compareKeys(x, y) {
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  return x.length - y.length;
}

/** The index of the newest release at or before `version`, null when the paste names none. */
export function releaseAt(releases, version) {
  if (!version) return null;
  const want = versionKey(version);
  let at = null;
  releases.forEach((ref, k) => {
    if (compareKeys(versionKey(ref), want) <= 0) at = k;
  });
  return at;
}

function sitesHave(entry, last, exact) {
  // At the line, in the function the frame names (or the start of it, where a terminal wrapped the line): lines
  // of other releases hold other functions.
  return entry.sites.some((s) => s[0] === last.path && (exact ? s[1] === last.line && s[2].startsWith(last.function.slice(last.function.lastIndexOf(".") + 1)) : s[2] === last.function));
}

/** The errors that best explain one exception of a paste, best first. */
export function scoreEntries(prepared, raised, version, top = 5) {
  const { vocabulary } = prepared;
  const text = leading(fold(raised.message), MAX_MESSAGE);
  const toks = words(text);
  const tw = toks.map((t) => vocabulary.get(t) ?? 0);
  let pastedType = raised.type.slice(raised.type.lastIndexOf(".") + 1);
  if (pastedType === "ValidationError") pastedType = "ValueError"; // pydantic wraps the ValueError a validator raised
  const vllmFrames = raised.frames.filter((f) => f.path);
  const last = vllmFrames.length ? vllmFrames[vllmFrames.length - 1] : null;
  const final = raised.frames.length ? raised.frames[raised.frames.length - 1] : null;
  // The traceback ends in vLLM: the raise is in that function.
  const deepest = Boolean(last) && final.path === last.path && final.line === last.line && final.function === last.function;
  const at = releaseAt(prepared.releases, version);

  // Candidates share a rare word with the message (or, if it has none, one of its three rarest).
  const known = [...new Set(toks.filter((t) => vocabulary.get(t)))].sort(
    (x, y) => vocabulary.get(y) - vocabulary.get(x) || (x < y ? -1 : x > y ? 1 : 0), // words are ASCII
  );
  let finders = known.filter((t) => vocabulary.get(t) >= RARE);
  if (!finders.length) finders = known.slice(0, 3);
  const reached = [...new Set(finders.flatMap((t) => prepared.postings.get(t) ?? []))].sort((x, y) => x - y);
  const bound = new Map(reached.map((k) => [k, known.reduce((sum, t) => sum + (prepared.entries[k].vocabulary.has(t) ? vocabulary.get(t) : 0), 0)]));
  // Ranked by the information shared times the share of the template's it is: a long message shares many
  // words with long templates by chance.
  const rankOf = new Map([...bound].map(([k, b]) => [k, (b * b) / Math.max(1, prepared.entries[k].total)]));
  const shortlist = [...bound.keys()]
    .sort((x, y) => (rankOf.get(y) > rankOf.get(x) ? 1 : rankOf.get(y) < rankOf.get(x) ? -1 : x - y))
    .slice(0, SHORTLIST);
  if (last) {
    prepared.entries.forEach((e, k) => {
      if (!bound.has(k) && sitesHave(e, last, true)) shortlist.push(k);
    });
  }

  const found = [];
  for (const k of shortlist) {
    const entry = prepared.entries[k];
    const [information, start, stop] = entry.total ? aligned(entry.words, entry.weights, toks) : [0, 0, -1];
    const [how, values, chars] = information && text ? matchHow(entry.parts, text, entry.literals) : [information ? "similar" : "frame", new Map(), 0];
    let score = 0.0;
    if (information) {
      let inside = 0;
      let everything = 0;
      tw.forEach((w, j) => {
        everything += w;
        if (j >= start && j <= stop) inside += w;
      });
      // The F-measure of the template's words found and of the message's words explained; an exact fit
      // explains all of the message, values included.
      // A message cut short is measured against the template's text as far as it goes; the rest, unsaid,
      // counts like words of the message outside the match.
      const said = how === "truncated" ? entry.weights.slice(0, prefixWords(entry.parts, chars)).reduce((a, b) => a + b, 0) : entry.total;
      const total = Math.max(said, information) + (entry.total - said) / OUTSIDE_DISCOUNT;
      const agreement = how === "exact" ? 1.0 : (2 * information) / (total + inside + (everything - inside) / OUTSIDE_DISCOUNT);
      score = agreement * Math.min(1.0, information / ENOUGH);
    }
    const exactFrame = Boolean(last && sitesHave(entry, last, true));
    const frameAgrees = exactFrame || Boolean(last && sitesHave(entry, last, false));
    if (!score && !exactFrame) continue;
    const typeAgrees = pastedType && entry.types.length ? entry.types.includes(pastedType) : null;
    // Every literal in order, and enough of them: whatever the words weigh elsewhere.
    // ... half as much after a leading placeholder that few words follow (`{x} is an empty sequence` takes any text)
    if (EXACTLY.includes(how) && (entry.letters >= EXACT_LETTERS || (how === "exact" && information >= prepared.singlesOut))) {
      score += typeof entry.parts[0] === "string" || information >= ENOUGH ? EXACT_BONUS : EXACT_BONUS / 2;
    }
    score += exactFrame ? FRAME_BONUS.exact : frameAgrees ? FRAME_BONUS.function : deepest ? FRAME_BONUS.elsewhere : 0.0;
    score += typeAgrees === true ? TYPE_BONUS.agrees : typeAgrees === false ? TYPE_BONUS.disagrees : 0.0;
    if (at !== null && entry.spans.some(([a, b]) => a <= at && at <= b)) score += RELEASE_BONUS;
    const match = new Match(entry.id, entry.title, pyRound(score, 4), how, values, information, typeAgrees, frameAgrees, entry.wrapper);
    const lived = entry.spans.reduce((n, [a, b]) => n + b - a + 1, 0);
    found.push({ match, rank: HOW_RANK[how], letters: how !== "similar" ? chars : 0, holes: entry.holes, lived,
      newest: entry.spans.length ? entry.spans[entry.spans.length - 1][1] : -1 });
  }
  // Ties: the fuller fit, more information, more literal text matched, fewer placeholders, in more releases, in a newer one.
  found.sort((x, y) => y.match.score - x.match.score || y.rank - x.rank || y.match.information - x.match.information
    || y.letters - x.letters || x.holes - y.holes || y.lived - x.lived || y.newest - x.newest || compare(x.match.id, y.match.id));
  const matches = [];
  for (const f of found) { // an error's best fitting message only
    if (matches.length < top && !matches.some((m) => m.id === f.match.id)) matches.push(f.match);
  }
  // The paste cannot tell apart candidates this near each other, nor two whose literal text it holds in order
  // (the same words in two releases, with a value where the other has text) unless a frame pins one.
  const rivals = (m, o) => EXACTLY.includes(m.how) && EXACTLY.includes(o.how) && !m.frameAgrees;
  return matches.map((m, i) => matches.some((o, k) => k !== i && (Math.abs(m.score - o.score) <= CLOSE || rivals(m, o)))
    ? new Match(m.id, m.title, m.score, m.how, m.values, m.information, m.typeAgrees, m.frameAgrees, m.wrapper, true)
    : m);
}

// --- the answer ---------------------------------------------------------------------------------------

/** The error from outside vLLM that an exception is, by the index's list: {name, says, see}, or null. */
export function outsideOf(prepared, raised) {
  const kind = asciiLower(raised.type);
  const message = asciiLower(fold(raised.message));
  for (const known of prepared.outside) {
    // Every pattern the entry gives must match: its type's in the type, its message's in the message.
    const checks = [[known.type, known.typePattern, kind], [known.message, known.messagePattern, message]].filter(([given]) => given);
    if (checks.every(([, pattern, text]) => pattern !== null && pattern.test(text))) {
      return { name: known.name, says: known.says, see: [...(known.see ?? [])] };
    }
  }
  return null;
}

/** An exception whose type names a module of another library (`torch.`, `ray.exceptions.`). */
export function foreignModule(raised) {
  const module = raised.type.split(".")[0];
  if (raised.type.includes(".") && !["vllm", "builtins", "pydantic", "pydantic_core"].includes(module)) {
    return { name: "module", says: `This is an error of ${module}, raised outside vLLM.`, see: [] };
  }
  return null;
}

/**
 * Where vLLM's code failed an `assert` without a message, by the traceback's last frame and its code line; or null.
 * Such asserts are internal checks with no page: the paste itself says where and what.
 */
export function bareAssert(raised) {
  const last = raised.frames.length ? raised.frames[raised.frames.length - 1] : null;
  const type = raised.type.slice(raised.type.lastIndexOf(".") + 1);
  const bare = type === "AssertionError" && !strip(raised.message);
  return bare && last && last.path && ASSERT_LINE.test(raised.source) ? last : null;
}

function splitSpace(text) {
  return strip(text).split(new RegExp(`[${S_}]+`)).filter((t) => t);
}

function lastName(name) {
  return name.slice(name.lastIndexOf(".") + 1);
}

function spanLines(prepared, spans) {
  const lines = [];
  for (const [a, b, n] of spans) for (let k = a; k <= b; k++) lines.push([prepared.releases[k], n]);
  return lines;
}

/** The keys a pasted expression may have: all of it, then shorter at each space, each also without a closing mark of the prose. */
export function assertKeys(text) {
  const tokens = splitSpace(text).slice(0, 30);
  const keys = [];
  for (let n = tokens.length; n > 0; n--) {
    const key = assertKey(tokens.slice(0, n).join(" "));
    keys.push(key, key.replace(/["`.,:;\u3002\uff0c\uff1a\uff1b]+$/, "")); // and the full-width 。，：；of CJK prose
  }
  return [...new Set(keys)].filter((k) => k);
}

/** [release, line] of the assert a traceback shows at `frame`, in each release that has it; none when it is unknown. */
export function assertLines(prepared, code, frame) {
  const key = assertKey(code.replace(/assert(?![A-Za-z0-9_])/, ""));
  const fn = lastName(frame.function);
  const site = (prepared.asserts.get(key) ?? []).find((s) => s[0] === frame.path && lastName(s[1]) === fn);
  return site ? spanLines(prepared, site[2]) : [];
}

/** The assert without a message a paste quotes with no frame at it (lookup.indexed_assert); or null. */
export function indexedAssert(prepared, paste) {
  const frames = paste.raised.flatMap((r) => r.frames.filter((f) => f.path));
  const texts = paste.raised.filter((r) => lastName(r.type) === "AssertionError" && strip(r.message)).map((r) => r.message);
  const at = releaseAt(prepared.releases, paste.version);
  for (const text of [...texts, ...(paste.asserts ?? [])].reverse()) { // the last one printed is nearest the failure
    for (const key of assertKeys(text)) {
      let sites = prepared.asserts.get(key) ?? [];
      if (at !== null) {
        const inRelease = sites.filter((s) => s[2].some(([a, b]) => a <= at && at <= b));
        if (inRelease.length) sites = inRelease;
      }
      const framed = sites.filter((s) => frames.some((f) => f.path === s[0] && lastName(f.function) === lastName(s[1])));
      const chosen = framed.length ? framed : sites;
      if (chosen.length !== 1 || (!framed.length && codePoints(key) < ASSERT_LETTERS)) continue;
      const [path, fn, spans] = chosen[0];
      const hit = at !== null ? spans.find(([a, b]) => a <= at && at <= b) : undefined;
      const line = hit ? hit[2] : spans[spans.length - 1][2];
      const raised = { type: "AssertionError", message: "", frames, process: "", chained: false, source: "assert " + splitSpace(text).join(" ") };
      return { raised, matches: [], kind: "assert", outside: null, assertion: { path, line, function: fn }, lines: spanLines(prepared, spans) };
    }
  }
  return null;
}

/** The traceback's last frame is in another installed library's code: that library raised it (lookup.foreign_frame). */
export function foreignFrame(raised) {
  const last = raised.frames.length ? raised.frames[raised.frames.length - 1] : null;
  // `raise X(...)`, an `assert` its AssertionError comes from, or any other line where Python's own TypeError, ... came from
  const name = raised.type.split(".").pop();
  const made = RAISE_NEW.test(raised.source) || (name === "AssertionError" && ASSERT_LINE.test(raised.source))
    || (PYTHON_RAISES.includes(name) && raised.source !== "" && !raised.source.startsWith("raise"));
  return last && !last.path && last.library && made ? { name: "module", says: `This is an error of ${last.library}, raised outside vLLM.`, see: [] } : null;
}

/** What one exception of a paste is: {raised, matches, kind ("vllm", "wrapper", "outside", "assert", "none"), outside, assertion}. */
export function find(prepared, raised, version, top = 5) {
  const assertion = bareAssert(raised);
  if (assertion) return { raised, matches: [], kind: "assert", outside: null, assertion, lines: assertLines(prepared, raised.source, assertion) };
  const matches = scoreEntries(prepared, raised, version, top);
  const raisedBy = foreignFrame(raised);
  if (raisedBy) return { raised, matches, kind: "outside", outside: raisedBy };
  const best = matches.length ? matches[0] : null;
  let outside = outsideOf(prepared, raised);
  // A vLLM message that merely resembles a foreign one ("CUDA out of memory occurred when warming up the
  // sampler ...") is vLLM's when its own literal text is all there and says much, or a frame pins it.
  const vllms = best !== null && ((best.frameAgrees && best.score >= CONFIDENT.high)
    || (EXACTLY.includes(best.how) && best.score >= CONFIDENT.high && best.information >= 2 * ENOUGH));
  if (outside && !vllms) return { raised, matches, kind: "outside", outside };
  outside = foreignModule(raised);
  if (outside && !(best && best.confidence !== "low")) return { raised, matches, kind: "outside", outside };
  if (best && best.confidence !== "low") return { raised, matches, kind: best.wrapper === WRAPPERS.points ? "wrapper" : "vllm", outside: null };
  return { raised, matches: matches.filter((m) => m.how !== "frame" && m.score > 0), kind: "none", outside: null };
}

function keyOf(raised) {
  const last = raised.frames.length ? raised.frames[raised.frames.length - 1] : null;
  return JSON.stringify([raised.type, raised.message, last && [last.path, last.line, last.function]]);
}

/** The root cause a paste shows, with the wrappers around it as context: {finding, context, version, kind}. */
export function answer(index, paste, top = 5) {
  const prepared = index.entries ? index : prepare(index);
  const findings = [];
  const seen = new Map();
  for (const raised of paste.raised) {
    const key = keyOf(raised);
    let finding = seen.get(key) ?? find(prepared, raised, paste.version, top);
    seen.set(key, finding);
    if ((finding.kind === "vllm" || finding.kind === "wrapper") && finding.matches[0].wrapper) {
      // A wrapper that quotes the error it stands for ("Worker failed with error '...'", "Error in model
      // execution: <the caught one>"): that error, when it can be told, is the cause; the wrapper, context.
      for (const value of finding.matches[0].values.values()) {
        if (findings.some((f) => strip(f.raised.message) === strip(value))) {
          finding = { ...finding, kind: "wrapper" }; // the error it quotes was printed before it: that one
        } else if (words(value).length >= 3) {
          const inner = find(prepared, { type: "", message: value, frames: [], process: "", chained: false }, paste.version, top);
          if (inner.kind === "vllm" || inner.kind === "outside") {
            findings.push(inner);
            finding = { ...finding, kind: "wrapper" };
          }
        }
      }
    }
    findings.push(finding);
  }
  if (findings.every((f) => f.kind === "none" || f.kind === "wrapper")) {
    // Nothing but wrappers and unknown errors: an assert the paste quotes without its frame may be the cause.
    const quoted = indexedAssert(prepared, paste);
    if (quoted) return { finding: quoted, context: unique(findings.filter((f) => f.kind === "wrapper")), version: paste.version, kind: "assert" };
  }
  if (!findings.length) return { finding: null, context: [], version: paste.version, kind: "none" };
  let root = findings.findLastIndex((f) => f.kind === "vllm" || f.kind === "outside" || f.kind === "assert");
  if (root < 0) {
    root = findings.findLastIndex((f) => f.kind === "wrapper");
    if (root < 0) root = findings.length - 1;
    // A wrapper pointing at an error printed before it that no vLLM error matches: that one is the cause.
    if (findings[root].kind === "wrapper" && findings[root].matches[0].wrapper === WRAPPERS.points) {
      const cause = findings.slice(0, root).findLastIndex((f) => f.kind === "none" && f.raised.type && strip(f.raised.message));
      if (cause >= 0) root = cause;
    }
  }
  // The same error found twice (quoted in another exception's text, say): the better fit is the one to answer with.
  const rootMatch = findings[root].kind === "vllm" && findings[root].matches.length ? findings[root].matches[0] : null;
  if (rootMatch) {
    let best = root;
    findings.forEach((f, k) => {
      if (f.kind !== "vllm" || !f.matches.length || f.matches[0].id !== rootMatch.id) return;
      const score = f.matches[0].score;
      const bestScore = findings[best].matches[0].score;
      if (score > bestScore || (score === bestScore && k > best)) best = k;
    });
    root = best;
  }
  // A vLLM error that only resembles the message, after an error named outside vLLM (CUDA out of memory, then
  // "... died during start-up"): the named one is the cause, the other is what it brought down.
  if (findings[root].kind === "vllm" && !EXACTLY.includes(findings[root].matches[0].how)) {
    for (let k = root - 1; k >= 0; k--) {
      if (findings[k].kind === "outside") {
        root = k;
        break;
      }
    }
  }
  // Raised while handling a vLLM error: that one is the cause.
  while (root > 0 && findings[root].kind === "vllm" && findings[root].raised.chained && findings[root - 1].kind === "vllm") root--;
  const context = findings.slice(root + 1).filter((f) => f.kind === "wrapper" || (f.kind === "vllm" && f.raised.chained));
  if (root > 0 && findings[root - 1].kind !== "none" && findings[root].raised.frames.length) {
    context.unshift(findings[root - 1]); // what it was raised while handling
  }
  return { finding: findings[root], context: unique(context), version: paste.version, kind: findings[root].kind };
}

function unique(findings) {
  const out = [];
  const seen = new Set();
  for (const f of findings) {
    const key = f.matches.length ? f.matches[0].id : f.raised.message;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(f);
    }
  }
  return out;
}

/** The best matches for the root cause of a paste, best first; none when no vLLM error matches. */
export function rank(index, paste, top = 5) {
  const found = answer(index, paste, top).finding;
  return found && (found.kind === "vllm" || found.kind === "wrapper") ? found.matches : [];
}

// --- the box ----------------------------------------------------------------------------------------

const ROOT = new URL("../", import.meta.url); // this file is <site>/assets/lookup.js
const DEBOUNCE_MS = 100;
const SHOWN_VALUE = 200; // characters of a placeholder's value shown
const SHOWN_PASTE = 300; // characters of a pasted exception shown

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function shorten(text, n) {
  return text.length > n ? text.slice(0, n) + "…" : text;
}

function errorLink(id, title) {
  const link = element("a", "ve-lookup__title", title);
  link.href = new URL(`errors/${encodeURIComponent(id)}.html`, ROOT).href;
  return link;
}

const NOTES = {
  truncated: "the message looks cut short",
  extended: "the message goes on past this error's text",
  similar: "worded differently: the message is close to this one, not the same",
  frame: "found by the traceback's last vLLM line",
};

function matchItem(match) {
  const item = element("li", "ve-lookup__match");
  const level = match.confidence;
  item.append(errorLink(match.id, match.title), " ", element("span", `ve-lookup__confidence ve-lookup__confidence--${level}`, `${level} confidence`));
  const note = NOTES[match.how];
  if (note) item.append(" ", element("span", "ve-lookup__note", note));
  const values = [...match.values].filter(([, value]) => value !== "");
  if (values.length) {
    const list = element("div", "ve-lookup__values");
    for (const [name, value] of values) list.append(element("code", null, `${name} = ${shorten(value, SHOWN_VALUE)}`), " ");
    item.append(list);
  }
  return item;
}

function raisedText(raised) {
  return shorten(raised.type ? `${raised.type}: ${raised.message}` : raised.message, SHOWN_PASTE);
}

export const UNKNOWN_CAUSE = "The error vLLM's wrapper points at is not one vLLM raises: it comes from a library vLLM calls " +
  "(PyTorch, CUDA, Ray, transformers, ...) or from your own code. Search for it under that library's name:";

export const ASSERT_ADVICE = "An assert without a message is vLLM checking its own assumptions: it has no page here. Read its condition " +
  "against the model and the flags you used; if nothing you set explains it, report it to vLLM with the whole traceback.";

/** Which release the line of an assert is (cli.assert_release): the paste's, else the newest with the check at that line. */
export function assertRelease(finding, version) {
  if (version) return ` (vLLM ${version})`;
  const newest = [...(finding.lines ?? [])].reverse().find(([, n]) => n === finding.assertion.line);
  const count = finding.lines.length;
  return newest ? ` (as in vLLM ${newest[0]}; the same check is in ${count} release${count !== 1 ? "s" : ""})` : "";
}

/** The answer on the page: the root cause's matches, an error from outside vLLM, or "no vLLM error", then the context. */
export function renderResults(prepared, text) {
  const out = document.createDocumentFragment();
  if (!strip(text)) return out;
  const found = answer(prepared, readPaste(text), 5);
  const titles = new Map(prepared.entries.map((e) => [e.id, e.title]));
  const { finding } = found;
  if (!finding || finding.kind === "none") {
    const releases = prepared.releases.length > 1 ? `vLLM ${prepared.releases[0]} to ${prepared.releases[prepared.releases.length - 1]}` : `vLLM ${prepared.release}`;
    out.append(element("p", "ve-lookup__status", `No vLLM error matches this paste (${releases}).`));
    if (finding && found.context.some((f) => f.kind === "wrapper")) {
      out.append(element("p", "ve-lookup__status", UNKNOWN_CAUSE));
      const pasted = element("p", "ve-lookup__cause");
      pasted.append(element("code", null, raisedText(finding.raised)));
      out.append(pasted);
      for (const f of found.context.filter((c) => c.kind === "wrapper")) {
        const line = element("p", "ve-lookup__cause", "Then reported as: ");
        line.append(errorLink(f.matches[0].id, f.matches[0].title));
        out.append(line);
      }
    }
    if (finding && finding.matches.length) {
      out.append(element("p", "ve-lookup__status", "Closest candidates:"));
      const list = element("ol", "ve-lookup__list");
      for (const m of finding.matches) {
        const item = element("li", "ve-lookup__match");
        item.append(errorLink(m.id, m.title), " ", element("span", "ve-lookup__note", "not a match"));
        list.append(item);
      }
      out.append(list);
    }
    return out;
  }
  if (finding.kind === "assert") {
    const where = finding.assertion;
    const what = element("p", "ve-lookup__cause", "An internal check of vLLM failed: ");
    what.append(element("code", null, finding.raised.source));
    out.append(what);
    out.append(element("p", "ve-lookup__note", `in ${where.function}, ${where.path}:${where.line}` + assertRelease(finding, found.version)));
    out.append(element("p", "ve-lookup__status", ASSERT_ADVICE));
  } else if (finding.kind === "outside") {
    out.append(element("p", "ve-lookup__status", finding.outside.says));
    const pasted = element("p", "ve-lookup__cause");
    pasted.append(element("code", null, raisedText(finding.raised)));
    out.append(pasted);
    const vllmFrames = finding.raised.frames.filter((f) => f.path);
    if (vllmFrames.length) {
      const last = vllmFrames[vllmFrames.length - 1];
      out.append(element("p", "ve-lookup__note", `vLLM was running ${last.path}:${last.line} in ${last.function} when it happened.`));
    }
    if (finding.outside.see.length) {
      out.append(element("p", "ve-lookup__status", "vLLM's pages on the usual cause:"));
      const list = element("ol", "ve-lookup__list");
      for (const id of finding.outside.see) {
        const item = element("li", "ve-lookup__match");
        item.append(errorLink(id, titles.get(id) ?? id));
        list.append(item);
      }
      out.append(list);
    }
  } else {
    const list = element("ol", "ve-lookup__list");
    for (const m of finding.matches) list.append(matchItem(m));
    out.append(list);
    if (finding.kind === "wrapper") {
      out.append(element("p", "ve-lookup__status",
        "This error only points at another one: the real error was printed earlier in the log, often by another process " +
        "(lines tagged (EngineCore pid=...), (EngineCore_DP0 pid=...) or (Worker pid=...)). Paste the whole log to find it."));
      const causes = (prepared.causes?.get(finding.matches[0].id) ?? []).slice(0, 5);
      if (causes.length) {
        out.append(element("p", "ve-lookup__status", "The errors reported most often behind it, in public issues:"));
        const list = element("ol", "ve-lookup__list");
        for (const id of causes) {
          const item = element("li", "ve-lookup__match");
          item.append(errorLink(id, titles.get(id) ?? id));
          list.append(item);
        }
        out.append(list);
      }
    }
  }
  for (const f of found.context) {
    const then = f.kind === "wrapper";
    const line = element("p", "ve-lookup__cause", then ? "Then reported as: " : "Raised while handling: ");
    if (!then) line.append(element("code", null, raisedText(f.raised)));
    if ((f.kind === "vllm" || f.kind === "wrapper") && f.matches.length) {
      if (!then) line.append(" — ");
      line.append(errorLink(f.matches[0].id, f.matches[0].title));
    } else if (f.kind === "outside") {
      line.append(" — ", f.outside.says);
    }
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

  let prepared = null;
  let loading = null;
  let timer = 0;
  const load = () =>
    (loading ??= fetch(new URL("api/lookup.json", ROOT))
      .then((response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        return response.json();
      })
      .then((data) => {
        if (data.format !== INDEX_FORMAT) throw new Error(`index format ${data.format}, this page reads ${INDEX_FORMAT}: reload the page`);
        prepared = prepare(data);
        root.dataset.state = "ready";
      })
      .catch((error) => {
        root.dataset.state = "failed";
        results.replaceChildren(element("p", "ve-lookup__status", `The list of errors could not be loaded (${error.message}).`));
      }));
  const show = () => {
    if (!prepared) return;
    results.replaceChildren(renderResults(prepared, box.value));
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
