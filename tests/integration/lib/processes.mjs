// Running commands: to completion, or in the background beside a recording (-p, -a).
import { spawn } from 'node:child_process';

// Runs a command to completion; resolves { code, signal, stdout, stderr, ms }.
export function run(command, args, { timeoutMs = 120_000, env, cwd } = {}) {
  return new Promise((resolvePromise, reject) => {
    const started = Date.now();
    const child = spawn(command, args, {
      env: env ?? process.env, cwd, stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const result = {
        code, signal, timedOut,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        ms: Date.now() - started,
      };
      if (timedOut) {
        reject(new Error(`${command} ${args.join(' ')} timed out after ${timeoutMs} ms\n` +
                         `stderr: ${result.stderr}`));
      } else {
        resolvePromise(result);
      }
    });
  });
}

// Starts `command args` in the background; `done` resolves like run() once it exits.
export function startBackground(command, args, { env } = {}) {
  const child = spawn(command, args, { env: env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [];
  const err = [];
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => err.push(d));
  const done = new Promise((resolvePromise, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolvePromise({
      code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
    }));
  });
  let exited = false;
  done.then(() => { exited = true; }, () => { exited = true; });
  return { child, pid: child.pid, done, stderrSoFar: () => Buffer.concat(err).toString('utf8'),
           exited: () => exited };
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
