// Real processes for the tests: fencerd (one node, or a cluster of three),
// redis-server and PostgreSQL, each on free loopback ports with temporary
// directories, stopped when the test that started it ends. A missing tool
// fails the test with what to install; nothing is skipped.

import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, closeSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** eventually polls fn until it returns a truthy value, or throws the last
 * failure after within ms. */
export async function eventually(within, fn, what = 'condition') {
  const deadline = Date.now() + within;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${within}ms${last ? `: ${last.message}` : ''}`);
    await sleep(50);
  }
}

/** tempDir makes a temporary directory removed when the test ends. */
export function tempDir(t, prefix = 'fencer-node-') {
  const d = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** freePorts returns n distinct loopback ports that were free at once. */
export async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      await new Promise((res, rej) => s.listen(0, '127.0.0.1', res).once('error', rej));
      servers.push(s);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

const running = new Set();
process.on('exit', () => { for (const p of running) p.kill('SIGKILL'); });

/** Proc is a child process with its output in a log file. */
export class Proc {
  constructor(cmd, args, logPath, opts = {}) {
    this.logPath = logPath;
    const fd = openSync(logPath, 'a');
    this.child = spawn(cmd, args, { stdio: ['ignore', fd, fd], ...opts });
    closeSync(fd);
    running.add(this.child);
    this.exited = new Promise((resolve) => this.child.once('exit', (code, sig) => {
      running.delete(this.child);
      resolve({ code, sig });
    }));
    this.done = false;
    this.exited.then(() => { this.done = true; });
    this.child.once('error', () => {});
  }

  log() {
    try {
      return readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  signal(sig) {
    if (!this.done) this.child.kill(sig);
  }

  /** stop sends SIGCONT and SIGTERM, then SIGKILL after 5 s. */
  async stop() {
    if (this.done) return;
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const t = setTimeout(() => this.signal('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
  }

  async kill9() {
    this.signal('SIGKILL');
    await this.exited;
  }
}

/** call sends one command on a connection of its own (integers as strings). */
export function call(addr, ...args) {
  return callWith({}, addr, ...args);
}

/** callWith is call with ioredis options (password, tls). */
export async function callWith(opts, addr, ...args) {
  const [host, port] = addr.split(':');
  const r = new Redis({ host, port: Number(port), lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null, enableReadyCheck: false, stringNumbers: true, connectTimeout: 2000, ...opts });
  r.on('error', () => {});
  let timer;
  try {
    await r.connect();
    return await Promise.race([r.call(...args.map(String)), new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${args[0]} to ${addr}: no reply within 15s`)), 15000);
    })]);
  } finally {
    clearTimeout(timer);
    r.disconnect();
  }
}

/** fencerdBinary is $FENCERD (test/run.js sets it, building fencerd if needed). */
export function fencerdBinary() {
  const p = process.env.FENCERD;
  if (!p) throw new Error('FENCERD is not set: run the tests with npm test (which builds fencerd), or set FENCERD to a fencerd binary');
  if (!existsSync(p)) throw new Error(`FENCERD=${p} does not exist`);
  return p;
}

/** Fencerd is one fencerd process. */
export class Fencerd {
  constructor(dir, port, raftPort, httpPort, extra = []) {
    this.dir = dir;
    this.port = port;
    this.addr = `127.0.0.1:${port}`;
    this.http = `127.0.0.1:${httpPort}`;
    this.args = ['--data-dir', join(dir, 'data'), '--listen', this.addr, '--raft-listen', `127.0.0.1:${raftPort}`, '--http-listen', this.http, ...extra];
  }

  /** metric reads one series of the node's /metrics (the leader's table). */
  async metric(name) {
    const text = await (await fetch(`http://${this.http}/metrics`)).text();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    if (!m) throw new Error(`no ${name} in /metrics`);
    return Number(m[1]);
  }

  /** waiters is how many acquires are queued (WAIT) on this node. */
  waiters() {
    return this.metric('fencer_waiters');
  }

  start() {
    this.proc = new Proc(fencerdBinary(), this.args, join(this.dir, 'fencerd.log'));
  }

  /** waitReady waits until the node answers PING (with auth if given). */
  async waitReady(ping = () => call(this.addr, 'PING')) {
    await eventually(30000, async () => {
      if (this.proc.done) throw new Error(`fencerd exited: ${this.proc.log()}`);
      return (await ping()) !== undefined;
    }, `fencerd ${this.addr} answering`);
  }

  pause() { this.proc.signal('SIGSTOP'); }
  resume() { this.proc.signal('SIGCONT'); }
  stop() { return this.proc?.stop(); }
  kill9() { return this.proc.kill9(); }
}

/** startFencerd starts a one-node cluster and waits until it has a leader.
 * opts.connect holds the ioredis options (password, tls) to ask it with. */
export async function startFencerd(t, extra = [], opts = {}) {
  const dir = tempDir(t, 'fencer-node-fencerd-');
  const [port, raftPort, httpPort] = await freePorts(3);
  const d = new Fencerd(dir, port, raftPort, httpPort, extra);
  d.start();
  t.after(() => d.stop());
  const c = opts.connect ?? {};
  await d.waitReady(() => callWith(c, d.addr, 'PING'));
  await eventually(30000, async () => (await callWith(c, d.addr, 'FENCE.LEADER')) !== null, 'a leader');
  return d;
}

/** Cluster is three fencerd processes forming one Raft cluster. */
export class Cluster {
  constructor(nodes) {
    this.nodes = nodes;
  }

  get addrs() {
    return this.nodes.map((n) => n.addr);
  }

  /** leader returns the index of the node the live nodes agree leads. */
  async leader(within = 30000, alive = this.nodes) {
    return eventually(within, async () => {
      const seen = new Set();
      for (const n of alive) {
        const v = await call(n.addr, 'FENCE.LEADER');
        if (!v || !v[1]) return undefined;
        seen.add(String(v[1]));
      }
      if (seen.size !== 1) return undefined;
      const i = this.nodes.findIndex((n) => n.addr === [...seen][0]);
      return i >= 0 && alive.includes(this.nodes[i]) ? { index: i } : undefined;
    }, 'an agreed leader').then((r) => r.index);
  }
}

/** startCluster starts three nodes (the first bootstraps, the others
 * join) and waits until every node lists three members with client
 * addresses and all agree on the leader. */
export async function startCluster(t, n = 3) {
  const ports = await freePorts(3 * n);
  const nodes = [];
  for (let i = 0; i < n; i++) {
    const join = i === 0 ? [] : ['--join', nodes.map((x) => x.addr).join(',')];
    nodes.push(new Fencerd(tempDir(t, `fencer-node-n${i + 1}-`), ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], join));
  }
  for (const d of nodes) {
    d.start();
    t.after(() => d.stop());
  }
  for (const d of nodes) await d.waitReady();
  const c = new Cluster(nodes);
  await eventually(30000, async () => {
    for (const d of nodes) {
      const m = await call(d.addr, 'FENCE.MEMBERS');
      if (!Array.isArray(m) || m.length !== n || m.some((x) => !x[2])) return false;
    }
    return true;
  }, 'three members');
  await c.leader();
  return c;
}

/** startRedis starts a redis-server of the test's own. */
export async function startRedis(t) {
  const which = spawnSync('redis-server', ['--version']);
  if (which.error) throw new Error('redis-server is not on PATH; install it: apt-get install redis-server');
  const dir = tempDir(t, 'fencer-node-redis-');
  const [port] = await freePorts(1);
  const p = new Proc('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], join(dir, 'redis.log'));
  t.after(() => p.stop());
  const addr = `127.0.0.1:${port}`;
  await eventually(10000, async () => {
    if (p.done) throw new Error(`redis-server exited: ${p.log()}`);
    return (await call(addr, 'PING')) === 'PONG';
  }, 'redis-server answering');
  return { addr, port, proc: p };
}

/** redisClient is an ioredis client closed when the test ends. */
export function redisClient(t, addr, opts = {}) {
  const [host, port] = addr.split(':');
  const r = new Redis({ host, port: Number(port), maxRetriesPerRequest: 1, ...opts });
  r.on('error', () => {});
  t.after(() => r.disconnect());
  return r;
}

// PostgreSQL: initdb once per test process into a template, copied for
// each server, as fence/fencesql/postgres_test.go does.
const missingPostgres = 'these tests need a real PostgreSQL server (initdb, pg_ctl, postgres);'
  + ' on Debian or Ubuntu install it with: apt-get install postgresql';
let pgTemplate;

function postgresBin() {
  const base = '/usr/lib/postgresql';
  let versions = [];
  try {
    versions = spawnSync('ls', [base]).stdout.toString().split(/\s+/).filter((v) => /^\d+$/.test(v)).map(Number).sort((a, b) => a - b);
  } catch { /* none */ }
  for (const v of versions.reverse()) {
    if (existsSync(join(base, String(v), 'bin', 'initdb'))) return join(base, String(v), 'bin');
  }
  const w = spawnSync('sh', ['-c', 'command -v initdb']);
  if (w.status === 0) return join(w.stdout.toString().trim(), '..');
  throw new Error(`no initdb under ${base}/*/bin or on PATH; ${missingPostgres}`);
}

/** asPostgres is the command prefix that runs a server binary as user
 * postgres when we are root (initdb refuses root), and chowns dir to it. */
function asPostgres(dir) {
  if (process.getuid() !== 0) return [];
  const id = spawnSync('id', ['-u', 'postgres']);
  const gid = spawnSync('id', ['-g', 'postgres']);
  if (id.status !== 0) throw new Error(`running as root, and there is no postgres user to run the server as; ${missingPostgres}`);
  chownSync(dir, Number(id.stdout), Number(gid.stdout));
  return ['runuser', '-u', 'postgres', '--'];
}

function pgRun(prefix, bin, name, args, cwd) {
  const argv = [...prefix, join(bin, name), ...args];
  const r = spawnSync(argv[0], argv.slice(1), { cwd, timeout: 120000 });
  if (r.error || r.status !== 0) {
    throw new Error(`${name} ${args.join(' ')}: ${r.error?.message ?? `exit ${r.status}`}\n${r.stdout}${r.stderr}`);
  }
}

/** startPostgres starts a PostgreSQL server of the test's own and returns
 * its connection string (user postgres, trust authentication). */
export async function startPostgres(t) {
  if (!pgTemplate) {
    const bin = postgresBin();
    const dir = mkdtempSync(join(tmpdir(), 'fencer-node-pg-template-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    const prefix = asPostgres(dir);
    pgRun(prefix, bin, 'initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'], dir);
    pgTemplate = { bin, dir };
  }
  const { bin } = pgTemplate;
  const dir = mkdtempSync(join(tmpdir(), 'fencer-node-pg-'));
  const prefix = asPostgres(dir);
  const cp = spawnSync('cp', ['-a', join(pgTemplate.dir, 'data'), join(dir, 'data')]);
  if (cp.status !== 0) throw new Error(`copying the template cluster: ${cp.stderr}`);
  const [port] = await freePorts(1);
  const data = join(dir, 'data');
  const logPath = join(dir, 'postgres.log');
  const opts = [`-c listen_addresses=127.0.0.1`, `-c port=${port}`, `-c unix_socket_directories=${dir}`, '-c fsync=off'].join(' ');
  t.after(() => {
    if (existsSync(join(data, 'postmaster.pid'))) {
      // Smart first: it waits for the sessions still closing (a pool's
      // end() resolves before its clients' sockets have closed), where a
      // fast stop would send them "terminating connection due to
      // administrator command", an error event after the test ended.
      for (const mode of [['smart', '10'], ['fast', '60'], ['immediate', '60']]) {
        try {
          pgRun(prefix, bin, 'pg_ctl', ['-D', data, '-m', mode[0], '-w', '-t', mode[1], 'stop'], dir);
          break;
        } catch { /* the next mode; removed below all the same */ }
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    pgRun(prefix, bin, 'pg_ctl', ['-D', data, '-l', logPath, '-o', opts, '-w', '-t', '60', 'start'], dir);
  } catch (e) {
    throw new Error(`starting PostgreSQL: ${e.message}\n${existsSync(logPath) ? readFileSync(logPath, 'utf8') : ''}\n${missingPostgres}`);
  }
  return `postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable`;
}

/** fileScope stands in for a test context (its after) for processes that
 * the tests of one file share: register `after(scope.cleanup)` at the top
 * level of the file. */
export function fileScope() {
  const fns = [];
  return {
    after: (fn) => { fns.push(fn); },
    cleanup: async () => {
      for (const fn of fns.reverse()) await fn();
    },
  };
}

/** slowLink starts a TCP proxy on a free loopback port to target
 * ("host:port") that delivers every chunk ms late each way, as a distant
 * node would. onConnect(n) runs as the proxy accepts its n-th connection.
 * It is closed, with every connection through it, when the test ends. */
export async function slowLink(t, target, ms, onConnect = () => {}) {
  const [host, port] = target.split(':');
  const sockets = new Set();
  let accepted = 0;
  const relay = (from, to) => {
    from.on('data', (chunk) => setTimeout(() => { if (!to.destroyed) to.write(chunk); }, ms));
    from.on('close', () => setTimeout(() => to.destroy(), ms));
    from.on('error', () => {});
  };
  const server = net.createServer((down) => {
    const up = net.connect(Number(port), host);
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    relay(down, up);
    relay(up, down);
    onConnect(++accepted);
  });
  await new Promise((res, rej) => server.listen(0, '127.0.0.1', res).once('error', rej));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return { addr: `127.0.0.1:${server.address().port}`, get open() { return sockets.size / 2; } };
}

/** silentNode starts a TCP server on a free loopback port that accepts
 * connections and never answers, as a hung node would. onData runs on
 * every chunk it is sent. It is closed when the test ends. */
export async function silentNode(t, onData = () => {}) {
  const sockets = new Set();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    s.on('data', (chunk) => onData(chunk));
  });
  await new Promise((res, rej) => server.listen(0, '127.0.0.1', res).once('error', rej));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return { addr: `127.0.0.1:${server.address().port}` };
}
