// The chapter's lab (attncheck lab -o DIR) in headless chromium: the
// chapter's numbers, the single-factor experiments and the share URL.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { join } from "node:path";

import { attncheck, currentRows, entropy, fileUrl, launch, rowTexts, scratch } from "./support.mjs";

const chapterRow3 = ["0.376", "0.175", "0.448", "0", "0"];
const scoreTables = ["table-Q", "table-R", "table-S", "table-M", "table-L", "table-A", "table-O"];
let browser, lab;

before(async () => {
  const dir = scratch("lab");
  const r = attncheck("lab", "-o", dir);
  assert.equal(r.status, 0, r.stderr);
  lab = join(dir, "lab.html");
  browser = await launch();
});
after(async () => { if (browser) await browser.close(); });

async function open(fragment = "") {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(fileUrl(lab, fragment));
  await page.waitForSelector("#table-A tbody tr");
  page.scriptErrors = errors;
  return page;
}

const text = (page, selector) => page.$eval(selector, (e) => e.textContent);
const hidden = (page, selector) => page.$eval(selector, (e) => e.hidden);

async function setTau(page, label) {
  const index = await page.evaluate((l) => JSON.parse(document.getElementById("lab-data").textContent).taus.indexOf(l), label);
  assert.ok(index >= 0, `slider step ${label}`);
  await page.$eval("#tau", (slider, i) => {
    slider.value = String(i);
    slider.dispatchEvent(new Event("input", { bubbles: true }));
  }, index);
}

test("the default page shows the chapter's weights 0.376, 0.175, 0.448, 0, 0 for query 3", async () => {
  const page = await open();
  assert.deepEqual(await rowTexts(page, "table-A", 2), [...chapterRow3, "0.999", "1.000000000000000"]);
  assert.deepEqual(await rowTexts(page, "heat-A", 2), chapterRow3, "the heatmap cells carry the numbers");
  for (const id of scoreTables) assert.deepEqual(await currentRows(page, id), [2], `current row of ${id}`);
  assert.equal(await text(page, "#tau-value"), "τ = 0.85");
  assert.equal(await page.$eval("#causal", (c) => c.checked), true);
  assert.equal(await page.$eval("#share-url", (i) => i.value), fileUrl(lab, "#query=3&tau=0.85&causal=1"));
  assert.match(await text(page, "#summary"), /largest weight 0\.448 on key 3 \(上下文\); masked: 4 分配, 5 权重/);
  assert.match(await text(page, "#summary"), /row sum 0\.999 as displayed, 1\.0+ unrounded/);
  // M and L show −∞ where A shows an exact 0; the nine tables carry their shapes.
  assert.deepEqual((await rowTexts(page, "table-M", 2)).slice(3), ["−∞", "−∞"]);
  assert.deepEqual((await rowTexts(page, "table-L", 2)).slice(3), ["−∞", "−∞"]);
  const headings = await page.$$eval("#tables h3", (hs) => hs.map((h) => h.textContent));
  for (const [name, shape] of [["Q", "5×3"], ["K", "5×3"], ["V", "5×2"], ["QKᵀ", "5×5"], ["QKᵀ/√d_k", "5×5"],
                               ["M", "5×5"], ["L = (S + M)/τ", "5×5"], ["A = softmax(L)", "5×5"], ["O = AV", "5×2"]])
    assert.ok(headings.some((h) => h.startsWith(name + " ") && h.endsWith(`[${shape}]`)), `${name} [${shape}] in ${headings}`);
  assert.equal(await hidden(page, "#note"), true);
  assert.deepEqual(page.scriptErrors, []);
  await page.close();
});

test("#query=3&tau=0.85&causal=1 opens on the chapter's state, and another fragment on its own", async () => {
  let page = await open("#query=3&tau=0.85&causal=1");
  assert.deepEqual((await rowTexts(page, "table-A", 2)).slice(0, 5), chapterRow3);
  await page.close();
  page = await open("#query=2&tau=1.50&causal=0");
  assert.equal(await page.$eval("#query-2", (r) => r.checked), true);
  assert.equal(await text(page, "#tau-value"), "τ = 1.50");
  assert.equal(await page.$eval("#causal", (c) => c.checked), false);
  assert.deepEqual(await currentRows(page, "table-A"), [1]);
  assert.ok((await page.$$("#table-A td.masked")).length === 0, "no masked cell without the mask");
  assert.equal(await hidden(page, "#note"), true);
  await page.close();
});

test("raising τ to 1.50 flattens the allowed weights; masked cells stay 0 and O stays 5×2", async () => {
  const page = await open();
  const before = (await rowTexts(page, "table-A", 2)).slice(0, 5);
  const otherRowsBefore = await rowTexts(page, "table-K", 0);
  await setTau(page, "1.50");
  assert.equal(await text(page, "#tau-value"), "τ = 1.50");
  const afterRow = (await rowTexts(page, "table-A", 2)).slice(0, 5);
  assert.ok(entropy(afterRow.slice(0, 3)) > entropy(before.slice(0, 3)), `${afterRow} flatter than ${before}`);
  assert.ok(Math.max(...afterRow.map(Number)) < Math.max(...before.map(Number)));
  assert.deepEqual(afterRow.slice(3), ["0", "0"]);
  const masked = await page.$$eval("#table-A td.masked", (tds) => tds.map((td) => td.textContent));
  assert.equal(masked.length, 10, "the causal mask hides 10 of 25 cells");
  assert.ok(masked.every((t) => t === "0"));
  assert.equal((await page.$$("#table-O tbody tr")).length, 5);
  for (const tr of await page.$$("#table-O tbody tr")) assert.equal((await tr.$$("td")).length, 2);
  assert.deepEqual(await rowTexts(page, "table-K", 0), otherRowsBefore);
  assert.match(await text(page, "#summary"), /τ = 1\.50/);
  await page.close();
});

test("switching the query moves the highlight and leaves K and V unchanged", async () => {
  const page = await open();
  const tableText = (id) => page.$eval(`#${id} tbody`, (t) => t.textContent);
  const k = await tableText("table-K"), v = await tableText("table-V");
  await page.click("#query-5");
  for (const id of scoreTables) assert.deepEqual(await currentRows(page, id), [4], `current row of ${id}`);
  assert.deepEqual(await currentRows(page, "heat-A"), [4]);
  assert.deepEqual(await currentRows(page, "table-K"), []);
  assert.deepEqual(await currentRows(page, "table-V"), []);
  assert.equal(await tableText("table-K"), k);
  assert.equal(await tableText("table-V"), v);
  assert.match(await text(page, "#summary"), /^Query 5 \(权重\)/);
  assert.match(await text(page, "#steps"), /q5·k1 = 1\.2×1\.0 \+ 0\.5×0\.2 \+ -0\.6×0\.5 = /);
  assert.equal(await page.evaluate(() => location.hash), "#query=5&tau=0.85&causal=1");
  await page.close();
});

test("the share URL restores query, temperature and mask; reset returns to the defaults", async () => {
  const page = await open();
  await page.click("#query-1");
  await setTau(page, "2.00");
  await page.click("#causal");
  const url = await page.$eval("#share-url", (i) => i.value);
  assert.ok(url.endsWith("#query=1&tau=2.00&causal=0"), url);
  await page.click("#copy");
  await page.waitForFunction(() => document.getElementById("copy-status").textContent !== "");
  const a = await page.$eval("#table-A tbody", (t) => t.textContent);

  const shared = await browser.newPage();
  await shared.goto(url);
  await shared.waitForSelector("#table-A tbody tr");
  assert.equal(await shared.$eval("#query-1", (r) => r.checked), true);
  assert.equal(await shared.$eval("#tau-value", (o) => o.textContent), "τ = 2.00");
  assert.equal(await shared.$eval("#causal", (c) => c.checked), false);
  assert.equal(await shared.$eval("#table-A tbody", (t) => t.textContent), a);
  await shared.close();

  await page.click("#reset");
  assert.equal(await page.$eval("#share-url", (i) => i.value), fileUrl(lab, "#query=3&tau=0.85&causal=1"));
  assert.deepEqual((await rowTexts(page, "table-A", 2)).slice(0, 5), chapterRow3);
  assert.equal(await page.$eval("#causal", (c) => c.checked), true);
  await page.close();
});

test("an invalid fragment falls back to the defaults with a visible note", async () => {
  for (const [fragment, why] of [["#query=9&tau=0.85&causal=1", /query must be 1 to 5/],
                                 ["#query=3&tau=0.87&causal=1", /tau must be a slider step/],
                                 ["#query=3&tau=abc&causal=1", /tau must be a slider step/],
                                 ["#query=3&tau=0.85&causal=2", /causal must be 0 or 1/],
                                 ["#query=3&tau=0.85", /“causal” is missing/],
                                 ["#nonsense", /is not key=value/]]) {
    const page = await open(fragment);
    assert.equal(await hidden(page, "#note"), false, fragment);
    assert.match(await text(page, "#note"), why);
    assert.match(await text(page, "#note"), /Showing the defaults/);
    assert.deepEqual((await rowTexts(page, "table-A", 2)).slice(0, 5), chapterRow3, fragment);
    assert.deepEqual(page.scriptErrors, []);
    await page.close();
  }
});
