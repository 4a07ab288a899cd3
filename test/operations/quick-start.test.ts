// The README's quick start, command by command, against a real server: its "Try it" block run with curl
// as written (only the address changed to the test server's). Regression: the block pinged the same
// weblog twice, so its second command got 429 and a newcomer concluded the form endpoint was broken.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startApp, type TestApp } from '../helpers/app.js';

let t: TestApp;
before(async () => {
  t = await startApp();
  await t.listen();
});
after(async () => {
  await t?.close();
});

/** The shell commands of the ```sh block after "Try it:", one per command (backslash continuations joined). */
function tryIt(): string[] {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const block = /Try it:\n\n```sh\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(block, 'the README has a "Try it:" block');
  return block[1]
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .filter((l) => l.trim() !== '');
}

// curl runs asynchronously: the server answering it lives in this process's event loop.
const run = promisify(execFile);

test('the README\'s "Try it" commands each get "Thanks for the ping." (the second pinged the same weblog: 429)', async () => {
  const commands = tryIt();
  assert.equal(commands.length, 2);
  for (const cmd of commands) {
    assert.match(cmd, /^curl /);
    const r = await run('sh', ['-c', `${cmd.replaceAll('http://localhost:8080', t.url)} -w '\\n%{http_code}'`], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    const status = r.stdout.trim().split('\n').pop();
    assert.equal(status, '200', `${cmd}\n${r.stdout}`);
    assert.match(r.stdout, /Thanks for the ping\./, cmd);
  }
});
