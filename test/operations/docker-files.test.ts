// What can be checked of the Docker packaging without a Docker engine: the compose file parses and wires
// the services as documented, and the Dockerfile installs, copies and starts what the deployment guide
// (docs/guides/deployment.md) and package.json say.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describeConfig } from '../../src/platform/config.js';

const root = join(import.meta.dirname, '..', '..');
const read = (f: string) => readFileSync(join(root, f), 'utf8');

interface Instruction {
  op: string;
  args: string;
}

/** Dockerfile instructions with continuation lines joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let buf = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    buf += line.replace(/\\\s*$/, ' ');
    if (/\\\s*$/.test(line)) continue;
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(buf.trim());
    if (m) out.push({ op: m[1], args: m[2].trim() });
    buf = '';
  }
  return out;
}

const dockerfile = instructions(read('Dockerfile'));
const stages: Instruction[][] = [];
for (const i of dockerfile) {
  if (i.op === 'FROM') stages.push([]);
  stages.at(-1)?.push(i);
}
const runtime = stages.at(-1)!;
const pkg = JSON.parse(read('package.json'));
const guide = read('docs/guides/deployment.md');
const dockerSection = (() => {
  const start = guide.indexOf('<!-- section:docker -->');
  assert.ok(start >= 0, 'docs/guides/deployment.md has the docker section marker');
  const next = guide.indexOf('\n## ', guide.indexOf('\n## ', start) + 1);
  return guide.slice(start, next < 0 ? undefined : next);
})();

test('the Dockerfile is multi-stage on an official Node LTS image, runs as node, listens on 0.0.0.0:8080', () => {
  assert.ok(stages.length >= 2, 'a build stage and a runtime stage');
  const arg = dockerfile.find((i) => i.op === 'ARG' && i.args.startsWith('NODE_IMAGE='));
  const image = arg?.args.split('=')[1] ?? '';
  const m = /^node:(\d+)-(alpine|slim|bookworm-slim|alpine\d[\d.]*)$/.exec(image);
  assert.ok(m, `official node image with a pinned major, got ${image}`);
  assert.equal(Number(m[1]) % 2, 0, 'an even major: a Node LTS line');
  assert.ok(Number(m[1]) >= Number(/\d+/.exec(pkg.engines.node)![0]), 'satisfies package.json engines');
  for (const s of stages) assert.match(s[0].args, /^\$\{NODE_IMAGE\}/);
  assert.deepEqual(
    runtime.filter((i) => i.op === 'USER').map((i) => i.args),
    ['node'],
    'the runtime stage drops root',
  );
  const env = runtime
    .filter((i) => i.op === 'ENV')
    .map((i) => i.args)
    .join(' ');
  assert.match(env, /\bHOST=0\.0\.0\.0\b/);
  assert.match(env, /\bPORT=8080\b/);
  assert.match(env, /\bNODE_ENV=production\b/);
  assert.deepEqual(
    runtime.filter((i) => i.op === 'EXPOSE').map((i) => i.args),
    ['8080'],
  );
});

test('the runtime installs production dependencies only and starts the command npm start runs, in exec form', () => {
  const runs = runtime.filter((i) => i.op === 'RUN').map((i) => i.args);
  const install = runs.find((r) => /\bnpm ci\b/.test(r));
  assert.ok(install, 'npm ci in the runtime stage');
  assert.match(install, /npm ci --omit=dev --ignore-scripts\b/);
  const build = stages[0].filter((i) => i.op === 'RUN').map((i) => i.args);
  assert.ok(
    build.some((r) => /\bnpm ci\b/.test(r) && !/--omit=dev/.test(r)),
    'the build stage installs dev dependencies (tsc)',
  );
  assert.ok(build.includes('npm run build'));

  const cmd = runtime.find((i) => i.op === 'CMD');
  assert.ok(cmd);
  const argv = JSON.parse(cmd.args) as string[]; // exec form: JSON, so no shell stands between Docker and node
  // npm start sets the glibc malloc settings the image sets as ENV, then runs the same command.
  const start = pkg.scripts.start.split(' ');
  assert.deepEqual(
    start.filter((w: string) => /^MALLOC_/.test(w)),
    ['MALLOC_ARENA_MAX=2', 'MALLOC_MMAP_THRESHOLD_=131072'],
  );
  assert.deepEqual(
    argv,
    start.filter((w: string) => !/^MALLOC_/.test(w)),
  );
  assert.deepEqual(argv, ['node', 'bin/pingd.js', 'serve']);
  assert.equal(runtime.filter((i) => i.op === 'ENTRYPOINT').length, 0, 'no wrapper script in front of node');

  // The deployment guide tells the same story.
  assert.ok(dockerSection.includes('npm ci --omit=dev --ignore-scripts'), 'the deployment guide names the install command');
  assert.ok(dockerSection.includes(`\`${argv.join(' ')}\``), 'the deployment guide names the start command');
  assert.ok(dockerSection.includes('docker compose up -d'));
});

test('the image gets everything the compiled CLI needs at run time, and the context leaves secrets out', () => {
  const copies = runtime.filter((i) => i.op === 'COPY').map((i) => i.args);
  const sources = copies.flatMap((c) =>
    c
      .replace(/--\S+\s+/g, '')
      .split(/\s+/)
      .slice(0, -1),
  );
  for (const needed of ['package.json', 'package-lock.json', 'bin', 'migrations', '/app/dist', 'src/web/views', 'src/web/assets']) {
    assert.ok(sources.includes(needed), `runtime stage copies ${needed}`);
  }
  assert.ok(copies.some((c) => c.startsWith('--from=build /app/dist')));
  // bin/pingd.js loads dist/cli.js; migrations are found relative to dist/db/.
  assert.match(read('bin/pingd.js'), /join\(root, 'dist', 'cli\.js'\)/);
  const ignore = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  for (const p of ['.git', 'node_modules', 'dist', 'data', '.env']) assert.ok(ignore.includes(p), `.dockerignore has ${p}`);
  for (const p of ['src', 'bin', 'migrations', 'package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
    assert.ok(!ignore.includes(p), `.dockerignore keeps ${p}`);
    assert.ok(existsSync(join(root, p)), `${p} exists`);
  }
  const hc = runtime.find((i) => i.op === 'HEALTHCHECK');
  assert.ok(hc, 'HEALTHCHECK');
  const argv = JSON.parse(hc.args.replace(/^(--\S+\s+)*CMD\s+/, '')) as string[];
  assert.equal(argv[0], 'node', 'checked with node itself: the alpine image has no curl');
  assert.match(argv.join(' '), /\/readyz'/, 'on the readiness endpoint');
  assert.match(hc.args, /--timeout=\d+s/);
});

test('the runtime needs no dev dependency, and carries none it does not use: "dependencies" is exactly what src/ imports', () => {
  const files = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
    );
  const imported = new Set<string>();
  for (const f of files('src')) {
    const text = read(f);
    // Import statements and re-exports only: an exported function whose SQL says `from 'deny'` imports nothing.
    const specs = [...text.matchAll(/^\s*(?:import\s[^;]*?|export\s*(?:\*|\{[^}]*\})\s*)\bfrom\s*'([^']+)'/gm), ...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g)];
    for (const m of specs) {
      if (m[1].startsWith('.')) continue;
      if (m[1].startsWith('node:')) continue;
      imported.add(m[1].startsWith('@') ? m[1].split('/').slice(0, 2).join('/') : m[1].split('/')[0]);
    }
  }
  assert.ok(imported.has('fastify') && imported.has('pg'), [...imported].join(' '));
  for (const p of imported)
    assert.ok(p in pkg.dependencies, `${p} is imported by src/ but is not a production dependency (npm ci --omit=dev leaves it out)`);
  // REGRESSION: xmlbuilder2 and xmlrpc sat in "dependencies" while src/ imported neither.
  for (const p of Object.keys(pkg.dependencies))
    assert.ok(imported.has(p), `${p} is a production dependency but src/ never imports it (a dev dependency, or none)`);
});

test('docker-compose.yml: the app waits for a healthy PostgreSQL, publishes only its own port, keeps data in a named volume', () => {
  const doc = parse(read('docker-compose.yml'), { merge: true });
  const { services, volumes } = doc;
  assert.deepEqual(Object.keys(services).sort(), ['pingd', 'pingd-2', 'postgres']);
  const app = services.pingd;
  const db = services.postgres;
  assert.equal(app.build, '.');
  assert.deepEqual(app.ports, ['${PINGD_PORT:-8080}:8080']);
  assert.deepEqual(app.depends_on, { postgres: { condition: 'service_healthy' } });
  // Compose spells out the image's HEALTHCHECK: the same command, on /readyz.
  const imageCheck = runtime.find((i) => i.op === 'HEALTHCHECK')!.args;
  assert.deepEqual(['CMD', ...JSON.parse(imageCheck.replace(/^(--\S+\s+)*CMD\s+/, ''))], app.healthcheck.test);
  for (const [k, v] of [
    ['interval', '15s'],
    ['timeout', '5s'],
    ['start_period', '30s'],
  ]) {
    assert.equal(app.healthcheck[k], v);
    assert.match(imageCheck, new RegExp(`--${k.replace('_', '-')}=${v}`));
  }
  assert.match(
    app.environment.DATABASE_URL,
    /^postgres:\/\/\$\{POSTGRES_USER:-pingd\}:\$\{POSTGRES_PASSWORD:-pingd\}@postgres:5432\/\$\{POSTGRES_DB:-pingd\}$/,
  );
  // Longer than pingd's own bound, so Docker's SIGKILL never cuts a graceful shutdown short.
  const grace = Number(/^(\d+)s$/.exec(app.stop_grace_period)![1]);
  assert.ok(grace * 1000 > Number(describeConfig().find((c) => c.name === 'SHUTDOWN_TIMEOUT_MS')!.default));

  assert.match(db.image, /^postgres:\d+(\.\d+)?-alpine$/);
  assert.equal(db.ports, undefined, 'the database is not published');
  assert.deepEqual(db.volumes, ['pgdata:/var/lib/postgresql/data']);
  assert.ok(Array.isArray(db.healthcheck.test) && /pg_isready/.test(db.healthcheck.test.join(' ')));
  assert.deepEqual(Object.keys(volumes), ['pgdata']);

  // The second replica is opt-in (a profile), on the same database, on another host port.
  const two = services['pingd-2'];
  assert.deepEqual(two.profiles, ['replicas']);
  assert.equal(two.environment.DATABASE_URL, app.environment.DATABASE_URL);
  assert.deepEqual(two.ports, ['${PINGD_2_PORT:-8081}:8080']);

  // Every setting can be given through compose, with its documented default; nothing else is passed.
  const spec = new Map(describeConfig().map((c) => [c.name, c.default]));
  const fixedByImage = ['PORT', 'HOST', 'DATA_DIR', 'DATABASE_URL'];
  for (const [name, value] of Object.entries(app.environment as Record<string, string>)) {
    if (name === 'DATABASE_URL') continue;
    assert.ok(spec.has(name), `${name} is a pingd setting`);
    assert.equal(value, `\${${name}:-${spec.get(name)}}`, `${name} defaults to ${spec.get(name)}`);
  }
  for (const name of spec.keys()) {
    if (!fixedByImage.includes(name)) assert.ok(name in app.environment, `docker-compose.yml passes ${name} (add new settings there)`);
  }
});
