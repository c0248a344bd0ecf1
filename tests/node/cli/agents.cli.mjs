// Codex and Claude Code, the agent CLIs, against svc's endpoints: a turn, and a turn that calls a
// tool, each in a throw-away home with its network extras off. Run by handlers/edge/agents_cli_test.go
// (TestAgentCLIs), which starts a server and passes the deployments in the environment. The file is
// not named *.test.mjs, so that `node --test tests/node/` (TestNodeSDKs) leaves it out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestAgentCLIs`);
  return v;
};
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
// The CLIs' packages: the pinned ones (@anthropic-ai/claude-code, @openai/codex) unless the test names
// another install (claude-code-next, codex-next: the newest, under npm aliases), by their package folder.
const cli = { codex: ['SVC_CODEX_PKG', '@openai/codex', 'bin/codex.js'], claude: ['SVC_CLAUDE_PKG', '@anthropic-ai/claude-code', 'bin/claude.exe'] };
const bin = (name) => {
  const [variable, pkg, file] = cli[name];
  return join(root, 'node_modules', process.env[variable] || pkg, file);
};
const base = env('SVC_EDGE_BASE');

// run executes a CLI with its stdin closed (codex exec waits for it otherwise), bounded in time.
const run = (file, args, options) => new Promise((resolve) => {
  const child = execFile(file, args, { timeout: 90_000, maxBuffer: 16 << 20, ...options }, (err, stdout, stderr) => {
    resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
  });
  child.stdin.end();
});

// Environment of a CLI: no telemetry, no update checks, no traffic besides the endpoint.
const quiet = (home) => ({
  PATH: process.env.PATH, HOME: home, TMPDIR: tmpdir(), LANG: 'C.UTF-8',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1', DISABLE_ERROR_REPORTING: '1',
  CODEX_DISABLE_UPDATE_CHECK: '1', NO_COLOR: '1',
});

const codex = (prompt, slug = env('SVC_CODEX_SLUG'), extra = '', key = env('SVC_CODEX_KEY')) => {
  const home = mkdtempSync(join(tmpdir(), 'svc-codex-'));
  const codexHome = join(home, '.codex');
  mkdirSync(codexHome);
  writeFileSync(join(codexHome, 'config.toml'), `model = "${env('SVC_CODEX_MODEL')}"
${extra}
model_provider = "svc"
[model_providers.svc]
name = "svc"
base_url = "${base}/e/${slug}/v1"
env_key = "SVC_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
[analytics]
enabled = false
`);
  return run(bin('codex'), ['exec', '--skip-git-repo-check', prompt],
    { cwd: home, env: { ...quiet(home), CODEX_HOME: codexHome, SVC_KEY: key } });
};

const claude = (prompt, ...args) => claudeAt(env('SVC_CLAUDE_SLUG'), prompt, ...args);

const claudeAt = (slug, prompt, ...args) => claudeWith(slug, env('SVC_CLAUDE_KEY'), prompt, ...args);

const claudeWith = (slug, key, prompt, ...args) => {
  const home = mkdtempSync(join(tmpdir(), 'svc-claude-'));
  return run(bin('claude'), ['-p', prompt, '--output-format', 'json', ...args], {
    cwd: home,
    env: { ...quiet(home), ANTHROPIC_BASE_URL: `${base}/e/${slug}`, ANTHROPIC_API_KEY: key,
      ANTHROPIC_MODEL: env('SVC_CLAUDE_MODEL') },
  });
};

test('codex exec: a turn over the Responses API', async () => {
  const r = await codex('say hello to codex');
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /say hello to codex/);
});

test('codex exec: a turn that runs a command (function call, then its output)', async () => {
  // The simulator calls exec_command, which the last user message names, with that message as cmd.
  const r = await codex('echo exec_command');
  assert.equal(r.code, 0, r.stdout + r.stderr);
  // Its last answer echoes the command's output, which Codex sent back as function_call_output.
  assert.match(r.stdout, /Process exited with code 0/, r.stdout + r.stderr);
});

test('codex exec: a reasoning model\'s reasoning shown with model_reasoning_summary = "detailed"', async () => {
  // svc answers the reasoning text as the summary Codex asked for, which Codex prints as its thinking.
  const r = await codex('explain reasoning', env('SVC_CLAUDE_SLUG'),
    'model_reasoning_summary = "detailed"\nmodel_reasoning_effort = "medium"\nmodel_supports_reasoning_summaries = true', env('SVC_CLAUDE_KEY'));
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout + r.stderr, /The user wrote: "explain reasoning"/, r.stdout + r.stderr);
});

test('claude -p: a turn through the Messages translation', async () => {
  const r = await claude('say hello to claude');
  const out = JSON.parse(r.stdout);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(out.is_error, false, r.stdout);
  // The simulator echoes the user turn, which Claude Code opens with its <system-reminder> context.
  assert.match(out.result, /say hello to claude$/);
  assert.ok(out.usage.input_tokens > 0 && out.usage.output_tokens > 0, r.stdout);
});

test('claude -p: a tool-use turn (Bash), thinking given back', async () => {
  // The simulator calls Bash, which the request names, with it as the command; Claude Code runs it and
  // sends the tool_result back with the signed thinking block of the turn before.
  const r = await claude('echo Bash', '--allowedTools', 'Bash');
  const out = JSON.parse(r.stdout);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(out.is_error, false, r.stdout);
  assert.ok(out.num_turns >= 2, r.stdout);
  assert.equal(out.result, 'Bash');
});

test('claude -p: the Write tool runs once, then the answer', async () => {
  // The simulator calls Write, which the request names, with that line as every string argument: a file
  // path in the throw-away home (its name ends in " Write") and the same text as the content. Claude Code
  // follows the tool_result with system entries of its own; the simulator must answer in text after it
  // rather than call Write again (which wrote files twice).
  const dir = mkdtempSync(join(tmpdir(), 'svc-write-'));
  const line = join(dir, 'notes Write');
  const r = await claude(line, '--allowedTools', 'Write');
  const out = JSON.parse(r.stdout);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal(out.is_error, false, r.stdout);
  assert.equal(readFileSync(line, 'utf8'), line);
  // One turn that called Write, one that answered: a second Write would be a third turn.
  assert.equal(out.num_turns, 2, r.stdout);
});

test('claude -p: a wrong key stops it at once (x-should-retry: false on the 401)', async () => {
  // Without the header Claude Code retries a 401 for minutes; with it, it says so and exits.
  const started = Date.now();
  const r = await claudeWith(env('SVC_CLAUDE_SLUG'), 'sk-ep-wrong', 'say hello');
  const took = Date.now() - started;
  assert.ok(took < 10_000, `claude -p with a wrong key took ${took} ms: ${r.stdout}${r.stderr}`);
  assert.match(r.stdout + r.stderr, /invalid api key|401/i, r.stdout + r.stderr);
});

// The same clients against the fake vLLM upstream (reasoning on, as vLLM with a reasoning parser):
// svc translates both surfaces to its chat completions.
test('codex exec and claude -p against a vLLM upstream', async () => {
  const c = await codex('say hello', env('SVC_UP_SLUG'));
  assert.equal(c.code, 0, c.stdout + c.stderr);
  assert.match(c.stdout, /The quick brown fox/);
  const r = await claudeAt(env('SVC_UP_SLUG'), 'say hello');
  const out = JSON.parse(r.stdout);
  assert.equal(out.is_error, false, r.stdout);
  assert.match(out.result, /^The quick brown fox/);
});

// The AI SDK's default OpenAI provider (`openai(model)`: the Responses API with store on) in a tool
// session of three turns: its later turns send the earlier answers back as item references, which the
// edge reads from the stored runs (and the export after it, TestAgentCLIs).
test('AI SDK default provider: a tool session over three turns', { skip: !process.env.SVC_AISDK_SLUG }, async () => {
  const openai = createOpenAI({ baseURL: `${base}/e/${env('SVC_AISDK_SLUG')}/v1`, apiKey: env('SVC_AISDK_KEY') });
  const tools = {
    get_weather: tool({
      description: 'Current weather for a place', inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => `rain in ${city}`,
    }),
  };
  const messages = [];
  for (const say of ['get_weather for Bergen', 'thanks', 'get_weather for Oslo']) {
    messages.push({ role: 'user', content: say });
    const r = await generateText({ model: openai(env('SVC_CODEX_MODEL')), messages, tools, stopWhen: stepCountIs(3), maxRetries: 0 });
    assert.ok(r.text.length > 0, JSON.stringify(r.steps.map((s) => s.content)));
    messages.push(...(r.responseMessages ?? r.response.messages)); // every step's (ai 7: response.messages is the last step's)
  }
  assert.equal(messages.filter((m) => m.role === 'tool').length, 2, JSON.stringify(messages));
});
