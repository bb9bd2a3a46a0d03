// Case pages (attncheck explain --html, and the page verify writes beside each
// failure's case file) in headless chromium: a failing mutant's page marks
// exactly the cells beyond their bound; slices are selectable; large cases
// are capped; bad input writes nothing.
import assert from "node:assert/strict";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { attncheck, fileUrl, launch, scratch } from "./support.mjs";

const mutant = "mutant:causal_off_by_one";
let browser, dir;

before(async () => {
  dir = scratch("case");
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function open(path) {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(fileUrl(path));
  await page.waitForSelector("#table-A tbody tr");
  page.scriptErrors = errors;
  return page;
}

// The cells `attncheck explain --impl` (compare_slice) lists as beyond their bound.
function cellsBeyondBound(caseFile, ...more) {
  const r = attncheck("explain", "--input", caseFile, "--impl", mutant, ...more);
  assert.equal(r.status, 0, r.stderr);
  return [...r.stdout.matchAll(/^ {2}([AO]\[\d+\]\[\d+\]): implementation/gm)].map((m) => m[1]).sort();
}

async function markedCells(page) {
  return (await page.$$eval("#impl-A td[data-beyond], #impl-O td[data-beyond]", (tds) =>
    tds.map((td) => `${td.closest("table").id.slice(5)}[${td.dataset.row}][${td.dataset.col}]`))).sort();
}

// A causal case with two heads whose values are small and distinct.
function writeTwoHeadCase(path, n) {
  const values = (count, mod, shift, div) => Array.from({ length: count }, (_, i) => ((i * 7) % mod - shift) / div);
  writeFileSync(path, JSON.stringify({
    attncheck_case: 1,
    shape: { batch: 1, heads: 2, n_q: n, n_k: n, d_k: 2, d_v: 2 },
    scale: null, temperature: 1, causal: "top_left", empty_rows: "reject",
    q: values(2 * n * 2, 11, 5, 4), k: values(2 * n * 2, 13, 6, 4), v: values(2 * n * 2, 7, 3, 2),
  }));
}

test("verify writes a page beside the failure's case file that marks exactly the cells beyond their bound", async () => {
  const failures = join(dir, "failures");
  const r = attncheck("verify", "--impl", mutant, "--property", "differential_reference", "--cases", "30",
                      "--seed", "1", "--failures-dir", failures);
  assert.equal(r.status, 1, "the mutant fails");
  const caseFile = readdirSync(failures).find((f) => f.endsWith(".json"));
  assert.ok(caseFile, "a case file");
  const pagePath = join(failures, caseFile.replace(/\.json$/, ".html"));
  assert.ok(existsSync(pagePath), "the case page beside it");
  assert.match(r.stdout, /case page: .*\.html/);

  const expected = cellsBeyondBound(join(failures, caseFile));
  assert.ok(expected.length > 0);
  const page = await open(pagePath);
  assert.deepEqual(await markedCells(page), expected);
  // Every cell says its error and error ÷ bound on hover; only the marked ones say "beyond".
  const titles = await page.$$eval("#impl-A td, #impl-O td", (tds) =>
    tds.map((td) => ({ beyond: td.hasAttribute("data-beyond"), title: td.title, text: td.textContent })));
  for (const t of titles) {
    assert.match(t.title, /error .* bound .* error ÷ bound /);
    assert.equal(t.title.includes("beyond its bound"), t.beyond, t.title);
    assert.equal(t.text.startsWith("✗ "), t.beyond, "the mark is a character, not only a colour");
  }
  // Both A's have a heatmap whose cells carry their numbers.
  for (const id of ["heat-ref-A", "heat-impl-A"])
    assert.ok((await page.$$eval(`#${id} td`, (tds) => tds.map((td) => td.textContent))).every((t) => /\d/.test(t)), id);
  assert.match(await page.$eval("#summary", (e) => e.textContent), /beyond their bound/);
  assert.deepEqual(page.scriptErrors, []);
  await page.close();
});

test("explain --html: the reference beside the implementation, on a selectable slice", async () => {
  const caseFile = join(dir, "two-heads.json");
  writeTwoHeadCase(caseFile, 5);
  const html = join(dir, "two-heads.html");
  const r = attncheck("explain", "--input", caseFile, "--impl", mutant, "--head", "1", "--html", html);
  assert.equal(r.status, 0, r.stderr);
  const page = await open(html);
  assert.equal(await page.$eval("#head", (s) => s.value), "1");
  assert.deepEqual(await markedCells(page), cellsBeyondBound(caseFile, "--head", "1"));
  const head1 = await page.$eval("#table-Q tbody", (t) => t.textContent);
  await page.select("#head", "0");
  assert.match(await page.$eval("#summary", (e) => e.textContent), /slice \(batch 0, head 0\)/);
  assert.notEqual(await page.$eval("#table-Q tbody", (t) => t.textContent), head1);
  assert.deepEqual(await markedCells(page), cellsBeyondBound(caseFile, "--head", "0"));
  // The nine tables with their shapes.
  const headings = await page.$$eval("#tables h3", (hs) => hs.map((h) => h.textContent));
  for (const shape of ["Q [5×2]", "K [5×2]", "V [5×2]", "R = QKᵀ [5×5]", "M 0 may read, −∞ masked [5×5]", "O = AV [5×2]"])
    assert.ok(headings.includes(shape), `${shape} in ${headings}`);
  assert.deepEqual(page.scriptErrors, []);
  await page.close();
});

test("a large case shows a scrolling corner of each table with a note", async () => {
  const caseFile = join(dir, "large.json");
  writeTwoHeadCase(caseFile, 60);
  const html = join(dir, "large.html");
  assert.equal(attncheck("explain", "--input", caseFile, "--html", html).status, 0);
  const page = await open(html);
  assert.equal((await page.$$("#table-A tbody tr")).length, 40);
  assert.match(await page.$eval("#table-A-figure .cap", (e) => e.textContent), /rows 0–39 of 60 and columns 0–39 of 60/);
  assert.equal(await page.$eval("#table-A-figure .scroll", (e) => getComputedStyle(e).overflow), "auto");
  await page.close();
});

test("bad input is a clear error and writes no page", () => {
  const out = join(dir, "never.html");
  const bad = join(dir, "bad.json");
  writeFileSync(bad, "{ not json");
  const good = join(dir, "good.json");
  writeTwoHeadCase(good, 3);
  for (const [args, message] of [
    [["--input", join(dir, "missing.json")], /missing\.json/],
    [["--input", bad], /bad\.json/],
    [["--input", good, "--impl", "no-such-implementation"], /--impl/],
    [["--input", good, "--head", "2"], /head/],
  ]) {
    const r = attncheck("explain", ...args, "--html", out);
    assert.equal(r.status, 2, `${args}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.ok(!existsSync(out), `${args} wrote nothing`);
  }
  const unwritable = join(dir, "no-such-dir", "page.html");
  const r = attncheck("explain", "--input", good, "--html", unwritable);
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--html.*cannot write/);
  assert.ok(!existsSync(join(dir, "no-such-dir")));

  // lab -o into a path under a regular file: exit 2 naming -o, nothing created.
  const lab = attncheck("lab", "-o", join(good, "lab"));
  assert.equal(lab.status, 2, lab.stderr);
  assert.match(lab.stderr, /option -o: cannot create the directory/);
  assert.equal(attncheck("lab").status, 2, "-o is required");
});
