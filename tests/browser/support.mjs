// Shared by the browser tests: the attncheck command, a scratch directory and
// Debian's headless chromium driven over the DevTools protocol. A missing
// browser or node module is a failure with the command that fixes it, never a skip.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const cli = process.env.ATTNCHECK_CLI;
export const chromium = process.env.ATTNCHECK_CHROMIUM || "/usr/bin/chromium";

export function scratch(name) {
  const root = process.env.ATTNCHECK_BROWSER_WORK || join(process.cwd(), "browser-tests");
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

// Runs the attncheck command; returns {status, stdout, stderr}.
export function attncheck(...args) {
  if (!cli || !existsSync(cli))
    throw new Error(`ATTNCHECK_CLI is not the built attncheck command (${cli}); run these tests through ctest`);
  const r = spawnSync(cli, args, { encoding: "utf8" });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export function fileUrl(path, fragment = "") {
  return pathToFileURL(path).href + fragment;
}

export async function launch() {
  if (!existsSync(chromium))
    throw new Error(`Debian's chromium is not installed (${chromium} is missing): ./attncheck test installs it, ` +
                    "or run: apt-get install chromium");
  let puppeteer;
  try {
    puppeteer = (await import("puppeteer-core")).default;
  } catch (e) {
    throw new Error("puppeteer-core is not installed in tests/browser/node_modules: ./attncheck test installs it, " +
                    "or run: npm ci --prefix tests/browser  (" + e.message + ")");
  }
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--allow-file-access-from-files"],
  });
}

// The text of every cell (td) of one table row, by table id and 0-based row.
export async function rowTexts(page, tableId, row) {
  return page.$$eval(`#${tableId} tbody tr[data-row="${row}"] td`, (tds) => tds.map((td) => td.textContent));
}

// Indices of the rows marked current in a table.
export async function currentRows(page, tableId) {
  return page.$$eval(`#${tableId} tbody tr.current`, (trs) => trs.map((tr) => Number(tr.dataset.row)));
}

export function entropy(weights) {
  return weights.map(Number).filter((a) => a > 0).reduce((h, a) => h - a * Math.log(a), 0);
}
