// `rehearsal serve` as a subprocess for the npm clients' tests, and the result lines those
// tests write. The server runs in its own process group (detached) and is killed with it; it
// listens on 127.0.0.1 port 0 and ends by itself when its script is used up or it idles.
//
// Each feature a test shows working is written as one JSON line to
// $REHEARSAL_CLIENT_RESULTS (default target/clients/) as
// {"client", "version", "api", "feature", "result": "works", "test"}; scripts/clients-table
// renders docs/wire.md's table of clients and features from those lines.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import fs from 'node:fs';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** The features of docs/wire.md's table, in its column order. */
export const FEATURES = ['plain', 'streaming', 'tool calls', 'parallel calls', 'error status', 'usage'];

export class Served {
  /** Starts `rehearsal serve SCENARIO` (a path from the repository's root). */
  static async start(scenario, { idleLimit = '20s' } = {}) {
    const bin = process.env.REHEARSAL_BIN;
    if (!bin) throw new Error('REHEARSAL_BIN is not set (scripts/node-tests sets it)');
    const proc = spawn(
      bin,
      ['serve', scenario, '--runtime', 'roku', '--time-scale', '0', '--idle-limit', idleLimit, '--format', 'json'],
      { cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const served = new Served(proc);
    const lines = createInterface({ input: proc.stderr });
    served.baseURL = await new Promise((resolve, reject) => {
      lines.on('line', (line) => {
        served.stderr.push(line);
        const m = /^export OPENAI_BASE_URL=(\S+)/.exec(line);
        if (m) resolve(m[1]);
      });
      proc.on('close', () => reject(new Error(`rehearsal serve printed no base URL:\n${served.stderr.join('\n')}`)));
    });
    // The Anthropic SDK takes the origin: it adds /v1/messages itself.
    served.origin = served.baseURL.replace(/\/v1$/, '');
    return served;
  }

  constructor(proc) {
    this.proc = proc;
    this.stderr = [];
    this.stdout = '';
    proc.stdout.on('data', (d) => (this.stdout += d));
    this.closed = new Promise((resolve) => proc.on('close', (code) => resolve(code)));
  }

  /** Waits for the server to judge and exit by itself: its exit code and its verdict record. */
  async verdict(timeoutMs = 30000) {
    const timer = setTimeout(() => this.kill(), timeoutMs);
    const code = await this.closed;
    clearTimeout(timer);
    const records = this.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
    const scenario = records.find((r) => r.type === 'scenario');
    return { code, verdict: scenario?.verdict, out: `${this.stdout}\n${this.stderr.join('\n')}` };
  }

  kill() {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      try {
        process.kill(-this.proc.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
}

/** The version of an installed package (read from its package.json). */
export function versionOf(name) {
  const file = path.join(import.meta.dirname, 'node_modules', ...name.split('/'), 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

/** A function that writes one `works` line for `feature` of `client` over `api`. */
export function recorder(client, api, test) {
  const dir = process.env.REHEARSAL_CLIENT_RESULTS ?? path.join(ROOT, 'target', 'clients');
  fs.mkdirSync(dir, { recursive: true });
  const slug = (s) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
  const file = path.join(dir, `node-${slug(client)}-${slug(api)}.jsonl`);
  const version = versionOf(client);
  return (feature) => {
    if (!FEATURES.includes(feature)) throw new Error(`unknown feature ${feature}`);
    const line = { client: `${client} (Node)`, version, api, feature, result: 'works', test };
    fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
  };
}
