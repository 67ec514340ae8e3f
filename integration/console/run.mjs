// The web console's end-to-end tests: headless Chromium (Debian's, driven
// by playwright-core) against a real 3-node cluster of fencerd processes,
// which integration/console_test.go starts and describes in the JSON file
// named by argv[2]. Each spec is a function of its own; the Go test says
// which to run. Every wait polls the page for up to 5 s and prints how
// long it took; a wait that runs out fails the spec.
import { chromium } from 'playwright-core';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';
import { join } from 'node:path';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const POLL = 5000;

function log(...a) { console.log(...a); }

// cli runs redis-cli against node i as user.
function cli(i, user, ...args) {
  const n = cfg.nodes[i];
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', n.port, '--user', user, '--pass', cfg.users[user], '--no-auth-warning', ...args],
    { encoding: 'utf8', timeout: 15000 }).trim();
}

// cliBackground starts a redis-cli that blocks (an acquire that waits).
function cliBackground(i, user, ...args) {
  const n = cfg.nodes[i];
  const p = spawn('redis-cli', ['-h', '127.0.0.1', '-p', n.port, '--user', user, '--pass', cfg.users[user], '--no-auth-warning', ...args], { stdio: 'ignore' });
  p.on('error', () => {});
  return p;
}

// poll calls check until it returns a true value, up to POLL ms; it logs
// and returns the time taken, or throws with what it saw last.
async function poll(what, check, within = POLL) {
  const start = Date.now();
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) {
        const took = Date.now() - start;
        log(`  ok: ${what} (observed after ${took} ms)`);
        return took;
      }
    } catch (e) {
      last = e.message;
    }
    if (Date.now() - start > within) throw new Error(`${what}: not seen within ${within} ms (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function check(cond, msg) { if (!cond) throw new Error(msg); log(`  ok: ${msg}`); }

async function shot(page, name) {
  if (!cfg.screenshots) return;
  mkdirSync(cfg.screenshots, { recursive: true });
  await page.screenshot({ path: join(cfg.screenshots, name), fullPage: true });
  log(`  screenshot ${name}`);
}

async function login(page, ui, user) {
  await page.goto(ui);
  await page.locator('#login-user').fill(user);
  await page.locator('#login-password').fill(cfg.users[user]);
  await page.locator('#login-password').press('Enter'); // the keyboard, not the mouse
  await page.locator('#app').waitFor({ state: 'visible', timeout: POLL });
}

// lockRow returns what the page shows of a lock: null if it has no row.
async function lockRow(page, name) {
  return page.evaluate((name) => {
    const tr = [...document.querySelectorAll('#locks tbody tr')].find((r) => r.dataset.lock === name);
    if (!tr) return null;
    const cell = (c) => tr.querySelector(`td.${c}`).textContent;
    return { holder: cell('holder'), client: cell('client'), token: cell('token'), ttl: cell('ttl'),
      waiters: [...tr.querySelectorAll('td.waiters li')].map((li) => li.textContent), pos: Number(tr.dataset.pos) };
  }, name);
}

// positions records every listing position the page shows, to check that
// it never goes back.
function watchPositions(page) {
  const seen = [];
  const timer = setInterval(async () => {
    try {
      const v = Number(await page.locator('#list-pos').textContent({ timeout: 500 }));
      if (v) seen.push(v);
    } catch (e) { /* page busy */ }
  }, 100);
  return { seen, stop: () => clearInterval(timer) };
}

const specs = {
  // live: a lock taken with redis-cli appears with its token, its countdown
  // runs, waiters show in order, a release moves it to the first waiter,
  // and killing the leader shows a new leader and the stopped node; the
  // listing's position never goes back.
  async live(browser) {
    const ui = cfg.nodes[cfg.console].ui;
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await login(page, ui, 'admin');
    const positions = watchPositions(page);
    const key = 'app:orders';
    const grant = cli(2, 'admin', 'FENCE.ACQUIRE', key, 'worker-1', '30000').split('\n');
    const token = grant[0];
    log(`  redis-cli FENCE.ACQUIRE ${key} worker-1: token ${token}`);
    await poll(`${key} shows worker-1 with token ${token}`, async () => {
      const r = await lockRow(page, key);
      return r && r.holder === 'worker-1' && r.token === token;
    });
    await poll('the holder\'s client is shown: user admin, redis-cli\'s address', async () => {
      const r = await lockRow(page, key);
      return r && /^admin from 127\.0\.0\.1:\d+$/.test(r.client);
    });
    let first;
    await poll('its TTL is shown', async () => { const r = await lockRow(page, key); first = r && parseFloat(r.ttl); return first > 0; });
    await poll('its countdown runs', async () => { const r = await lockRow(page, key); return r && parseFloat(r.ttl) <= first - 1; });
    const w2 = cliBackground(1, 'admin', 'FENCE.ACQUIRE', key, 'worker-2', '30000', 'WAIT', '25000');
    await poll('worker-2 waits', async () => { const r = await lockRow(page, key); return r && r.waiters.join() === 'worker-2'; });
    const w3 = cliBackground(0, 'admin', 'FENCE.ACQUIRE', key, 'worker-3', '30000', 'WAIT', '25000');
    await poll('worker-2 then worker-3 wait, in order', async () => { const r = await lockRow(page, key); return r && r.waiters.join() === 'worker-2,worker-3'; });
    await shot(page, 'console-waiters.png');
    check(/leader's current queue/.test(await page.locator('#locks thead').textContent()), "the waiters are labelled as the leader's current queue");
    check(cli(2, 'admin', 'FENCE.RELEASE', key, 'worker-1') === '1', 'worker-1 released');
    await poll(`${key} moves to worker-2 with a larger token, worker-3 still waiting`, async () => {
      const r = await lockRow(page, key);
      return r && r.holder === 'worker-2' && Number(r.token) > Number(token) && r.waiters.join() === 'worker-3';
    });
    await poll('the history shows the release and the grant', async () => {
      const t = await page.locator('#history').textContent();
      return t.includes(`released ${key} worker-1`) && t.includes(`granted ${key} worker-2`);
    });
    await shot(page, 'console-locks.png');

    // A session and an election held under it.
    const sid = cli(2, 'admin', 'FENCE.SESSION', 'OPEN', '60000');
    const epoch = cli(2, 'admin', 'FENCE.ACQUIRE', 'app:primary', 'candidate-a', '0', 'SESSION', sid, 'VALUE', 'db-a:5432').split('\n')[0];
    await poll(`session ${sid} is listed with its lock`, async () =>
      (await page.locator(`#sessions tr[data-key="${sid}"]`).textContent({ timeout: 500 })).includes('app:primary'));
    await poll(`the election app:primary shows candidate-a, epoch ${epoch}, value db-a:5432`, async () => {
      const t = await page.locator('#elections tr[data-key="app:primary"]').textContent({ timeout: 500 });
      return t.includes('candidate-a') && t.includes(epoch) && t.includes('db-a:5432');
    });

    // A reconnect: the feed is cut; what happens meanwhile arrives once the
    // page reconnects, resuming the watch from the last position it saw.
    await page.evaluate(() => state.feedCtl.abort());
    const gap = cli(2, 'admin', 'FENCE.ACQUIRE', 'app:gap', 'while-away', '30000').split('\n')[0];
    check(cli(2, 'admin', 'FENCE.RELEASE', 'app:gap', 'while-away') === '1', `app:gap granted (token ${gap}) and released while the feed was cut`);
    await poll('the page reconnected and shows the grant and release it missed', async () => {
      const t = await page.locator('#history').textContent();
      return (await page.evaluate(() => document.body.dataset.feed)) === 'live' &&
        t.includes(`@${gap} granted app:gap while-away`) && /released app:gap while-away/.test(t);
    });

    // The page's rule, fed directly: a listing from an older position (a
    // leader behind the last one) and an event replayed from before what
    // is shown change nothing.
    const shown = await lockRow(page, key);
    const stale = await page.evaluate(({ key, token }) => {
      const before = { listPos: state.listPos, leader: state.listLeader };
      handle({ type: 'locks', position: state.listPos - 1, leader: 'stale-leader', next: '', locks: [] });
      handle({ type: 'event', kind: 'released', key, position: state.rows.get(key).pos - 1, owner: 'worker-2', token: Number(token) });
      handle({ type: 'event', kind: 'granted', key, position: 1, owner: 'ghost', token: 1 });
      return { before, after: { listPos: state.listPos, leader: state.listLeader }, row: state.rows.get(key) };
    }, { key, token: shown.token });
    check(stale.after.listPos === stale.before.listPos && stale.after.leader === stale.before.leader, 'an older listing is ignored');
    check(stale.row && stale.row.holders.length === 1 && stale.row.holders[0].owner === 'worker-2', 'older events leave the lock as shown');

    // The keyboard: "/" focuses the filter; Enter on a row shows only its history.
    await page.keyboard.press('Escape');
    await page.locator('body').press('/');
    check(await page.evaluate(() => document.activeElement.id === 'prefix'), '"/" focuses the prefix filter');
    await page.locator(`#locks tr[data-lock="${key}"]`).focus();
    await page.keyboard.press('Enter');
    await poll(`Enter on the row shows ${key}'s history only`, async () =>
      (await page.locator('#history-of').textContent()) === `of ${key}` && (await page.locator(`#locks tr[data-lock="${key}"]`).getAttribute('aria-selected')) === 'true');
    // Contrast: every text shown against the white page, WCAG AA (4.5:1).
    const low = await page.evaluate(() => {
      const lum = (c) => {
        const [r, g, b] = c.match(/\d+/g).slice(0, 3).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const bad = [];
      for (const e of document.querySelectorAll('body *')) {
        if (!e.offsetParent || ![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
        const ratio = 1.05 / (lum(getComputedStyle(e).color) + 0.05);
        if (ratio < 4.5) bad.push(`${e.tagName}.${e.className}: ${ratio.toFixed(2)}`);
      }
      return bad;
    });
    check(low.length === 0, `every text has a contrast of 4.5:1 or more on the page (${low.join(', ') || 'none below'})`);

    const leader = cfg.nodes[cfg.leader];
    await poll(`the members show ${leader.id} as leader`, async () =>
      (await page.locator(`#members tr[data-member="${leader.id}"]`).getAttribute('data-leader', { timeout: 500 })) === 'true');
    process.kill(leader.pid, 'SIGKILL');
    log(`  killed the leader ${leader.id} (pid ${leader.pid})`);
    await poll('a new leader, and the killed node shown as stopped', async () => {
      const rows = await page.$$eval('#members tbody tr', (trs) => trs.map((tr) => ({ id: tr.dataset.member, leader: tr.dataset.leader, health: tr.dataset.health, text: tr.textContent })));
      const newLeader = rows.find((r) => r.leader === 'true');
      const dead = rows.find((r) => r.id === leader.id);
      const alive = rows.filter((r) => r.id !== leader.id);
      return rows.length === 3 && newLeader && newLeader.id !== leader.id && dead.health === 'stopped' && /stopped/.test(dead.text) &&
        alive.every((r) => r.health === 'healthy');
    }, cfg.electionPoll);
    await shot(page, 'console-members.png');
    await poll(`${key} is still shown, held by worker-2`, async () => { const r = await lockRow(page, key); return r && r.holder === 'worker-2'; });
    positions.stop();
    const back = positions.seen.findIndex((v, i) => i > 0 && v < positions.seen[i - 1]);
    check(positions.seen.length > 10 && back < 0, `the listing's position never went back (${positions.seen.length} readings, ${positions.seen[0]} to ${positions.seen[positions.seen.length - 1]})`);
    w2.kill(); w3.kill();
    await page.close();
  },

  // access: a page without login shows nothing; a user limited to app:*
  // sees only app:* locks and no cluster view; a POST without the token,
  // or from another origin, is refused; the admin's revoke works after its
  // confirmation and is in the audit trail with the user.
  async access(browser) {
    const n = cfg.nodes[cfg.console];
    const ui = n.ui;
    cli(cfg.console, 'admin', 'FENCE.ACQUIRE', 'app:visible', 'a1', '60000');
    const hidden = cli(cfg.console, 'admin', 'FENCE.ACQUIRE', 'other:hidden', 'o1', '60000').split('\n')[0];

    const anon = await browser.newContext();
    const p0 = await anon.newPage();
    await p0.goto(ui);
    await p0.locator('#login').waitFor({ state: 'visible', timeout: POLL });
    check(await p0.locator('#app').isHidden(), 'without login the page shows the login form only');
    await new Promise((r) => setTimeout(r, 1500));
    const text = await p0.content();
    check(!text.includes('app:visible') && !text.includes('other:hidden'), 'without login no lock name is on the page');
    const r0 = await p0.evaluate(async () => (await fetch('/api/feed', { method: 'POST' })).status);
    check(r0 === 401, `the feed without login answers 401 (got ${r0})`);
    await shot(p0, 'console-login.png');
    await anon.close();

    const appCtx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const pa = await appCtx.newPage();
    await login(pa, ui, 'app');
    await poll('user app sees app:visible', async () => (await lockRow(pa, 'app:visible')) !== null);
    await poll(`the listing has passed other:hidden's grant (position ${hidden})`, async () => Number(await pa.locator('#list-pos').textContent()) >= Number(hidden));
    check((await lockRow(pa, 'other:hidden')) === null && !(await pa.content()).includes('other:hidden'), 'user app does not see other:hidden');
    // The live feed too: grants made while the page is open.
    cli(cfg.console, 'admin', 'FENCE.ACQUIRE', 'other:later', 'o2', '60000');
    cli(cfg.console, 'admin', 'FENCE.ACQUIRE', 'app:later', 'a2', '60000');
    await poll('user app sees the grant of app:later as it happens', async () => (await pa.locator('#history').textContent()).includes('granted app:later a2'));
    check(!(await pa.content()).includes('other:later'), 'the grant of other:later, made just before, is not on user app\'s page');
    check((await pa.locator('#members tbody tr').count()) === 0 && (await pa.locator('button[data-action]').count()) === 0, 'user app has no members view and no actions');
    const r1 = await pa.evaluate(async () => (await fetch('/api/revoke', { method: 'POST', body: JSON.stringify({ target: 'app:visible', confirm: 'app:visible' }) })).status);
    check(r1 === 403, `a POST without the token is refused (got ${r1})`);
    await appCtx.close();

    // Another origin: a page served from elsewhere posts to the console.
    const evil = http.createServer((req, res) => {
      res.setHeader('Content-Type', 'text/html');
      res.end(`<script>
        window.results = Promise.all(['/api/revoke', '/api/feed'].map((p) =>
          fetch(${JSON.stringify(ui)}.replace(/\\/$/, '') + p, { method: 'POST', mode: 'no-cors', credentials: 'include',
            body: JSON.stringify({ target: 'app:visible', confirm: 'app:visible' }) }).then(() => 'sent', (e) => 'error')));
      </script>`);
    });
    await new Promise((r) => evil.listen(0, '127.0.0.1', r));
    const adminCtx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const pd = await adminCtx.newPage();
    await login(pd, ui, 'admin'); // the cookie is in this browser
    const pe = await adminCtx.newPage();
    await pe.goto(`http://localhost:${evil.address().port}/`);
    await pe.evaluate(() => window.results);
    await poll('the console logged the request from another origin as refused', async () =>
      readFileSync(n.log, 'utf8').includes('refused a request from another origin'));
    check(/^a1$/m.test(cli(cfg.console, 'admin', 'FENCE.STATUS', 'app:visible')), 'app:visible is still held by a1');
    const cookies = await adminCtx.cookies();
    const sid = cookies.find((c) => c.name === 'fencer_console');
    check(sid && sid.httpOnly && sid.sameSite === 'Strict', 'the session cookie is HttpOnly and SameSite=Strict');
    const token = await pd.evaluate(async () => (await (await fetch('/api/session', { method: 'POST', headers: { 'Content-Type': 'application/json' } })).json()).token);
    const r2 = await fetch(ui + 'api/revoke', { method: 'POST', headers: { Cookie: `fencer_console=${sid.value}`, 'X-Fencer-Token': token, Origin: 'http://evil.example' },
      body: JSON.stringify({ target: 'app:visible', confirm: 'app:visible' }) });
    check(r2.status === 403, `a POST with the token and cookie but another Origin is refused (got ${r2.status})`);
    evil.close();

    // The admin's revoke, after its confirmation.
    await poll('the admin sees app:visible', async () => (await lockRow(pd, 'app:visible')) !== null);
    await pd.locator('#locks tr[data-lock="app:visible"] button[data-action="revoke"]').click();
    await pd.locator('#confirm-input').fill('app:visibl');
    await pd.locator('#confirm-ok').click();
    await poll('a wrong confirmation is refused', async () => /not confirmed/.test(await pd.locator('#confirm-error').textContent()));
    check(/^a1$/m.test(cli(cfg.console, 'admin', 'FENCE.STATUS', 'app:visible')), 'app:visible is still held after a wrong confirmation');
    await pd.locator('#confirm-input').fill('app:visible');
    await shot(pd, 'console-revoke.png');
    await pd.locator('#confirm-input').press('Enter');
    await poll('app:visible is gone from the page', async () => (await lockRow(pd, 'app:visible')) === null);
    const status = cli(cfg.console, 'admin', 'FENCE.STATUS', 'app:visible');
    check(!/a1/.test(status), `app:visible is free after the revoke (FENCE.STATUS: ${JSON.stringify(status)})`);
    await poll('the audit trail has the revoke by admin through the console', async () =>
      /msg=audit action=revoke args=app:visible user=admin .*client_name=fencer-console/.test(readFileSync(n.log, 'utf8')));

    // The admin's transfer, after its confirmation.
    let target;
    await poll('a follower offers "Make leader"', async () => {
      target = await pd.locator('#members button[data-action="transfer"]').first().evaluate((b) => b.closest('tr').dataset.member, null, { timeout: 500 });
      return target;
    });
    await pd.locator(`#members tr[data-member="${target}"] button[data-action="transfer"]`).click();
    await pd.locator('#confirm-input').fill(target);
    await pd.locator('#confirm-input').press('Enter');
    await poll(`the members show ${target} as the leader after the transfer`, async () =>
      (await pd.locator(`#members tr[data-member="${target}"]`).getAttribute('data-leader', { timeout: 500 })) === 'true');
    await poll('the audit trail has the transfer by admin through the console', async () =>
      new RegExp(`msg=audit action=transfer args=${target} user=admin .*client_name=fencer-console`).test(readFileSync(n.log, 'utf8')));
    await adminCtx.close();
  },
};

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let failed = false;
try {
  for (const name of cfg.specs) {
    const start = Date.now();
    log(`spec ${name}`);
    try {
      await specs[name](browser);
      log(`spec ${name}: passed in ${Date.now() - start} ms`);
    } catch (e) {
      failed = true;
      log(`spec ${name}: FAILED after ${Date.now() - start} ms: ${e.stack || e}`);
    }
  }
} finally {
  await browser.close();
}
writeFileSync(process.argv[2] + '.done', failed ? 'failed' : 'passed');
process.exit(failed ? 1 : 0);
