// The edge through the real OpenAI and Anthropic SDKs, as users call it. Run by
// handlers/edge/node_test.go, which starts a server and passes the deployments in the environment.
// Node cannot resolve *.localhost, so the SDKs use the path form {base_url}/e/<slug>/v1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const base = env('SVC_EDGE_BASE'); // e.g. http://127.0.0.1:PORT
const url = (slug) => `${base}/e/${slug}/v1`;
const openai = (slug, apiKey) => new OpenAI({ baseURL: url(slug), apiKey, maxRetries: 0, timeout: 20_000 });

test('plain chat completion names the served model', async () => {
  const client = openai(env('SVC_KEY_SLUG'), env('SVC_KEY'));
  const res = await client.chat.completions.create({
    model: 'ignored-on-single-target',
    messages: [{ role: 'user', content: 'hello from node' }],
  });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.model, env('SVC_KEY_MODEL'));
  assert.equal(res.choices[0].message.content, 'hello from node');
  assert.ok(res.usage.completion_tokens > 0);
});

test('streaming chat completion with usage', async () => {
  const client = openai(env('SVC_KEY_SLUG'), env('SVC_KEY'));
  const stream = await client.chat.completions.create({
    messages: [{ role: 'user', content: 'one two three' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, 'one two three');
  assert.equal(usage?.completion_tokens, 3);
});

test('models list: every public model on a multi-model endpoint', async () => {
  const client = openai(env('SVC_MULTI_SLUG'), 'none-mode-placeholder');
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, env('SVC_PUBLIC_MODELS').split(','));
});

test('multi-model endpoint picks by model and refuses unknown ones', async () => {
  const client = openai(env('SVC_MULTI_SLUG'), 'none-mode-placeholder');
  const res = await client.chat.completions.create({ model: 'sim-lorem', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(res.model, 'sim-lorem');
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof OpenAI.NotFoundError && err.code === 'model_not_found',
  );
});

test('bad key is an AuthenticationError that does not echo the key', async () => {
  const bad = 'sk-ep-definitely-not-a-real-key-000000000';
  const client = openai(env('SVC_KEY_SLUG'), bad);
  await assert.rejects(
    client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof OpenAI.AuthenticationError && err.status === 401 && !String(err.message).includes(bad),
  );
});

test('revoked key is refused', async () => {
  const client = openai(env('SVC_KEY_SLUG'), env('SVC_REVOKED_KEY'));
  await assert.rejects(
    client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
    OpenAI.AuthenticationError,
  );
});

test('disabled endpoint answers 404 even with a valid key', async () => {
  const client = openai(env('SVC_DISABLED_SLUG'), env('SVC_DISABLED_KEY'));
  await assert.rejects(
    client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
    OpenAI.NotFoundError,
  );
});

test('an SDK given the full operation URL as base URL gets 404', async () => {
  const client = new OpenAI({ baseURL: `${url(env('SVC_KEY_SLUG'))}/chat/completions`, apiKey: env('SVC_KEY'), maxRetries: 0 });
  await assert.rejects(
    client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
    OpenAI.NotFoundError,
  );
});

test('messages API, plain and streaming', async () => {
  // The Anthropic SDK appends /v1/messages itself, so its base URL stops before /v1.
  const client = new Anthropic({ baseURL: `${base}/e/${env('SVC_KEY_SLUG')}`, apiKey: env('SVC_KEY'), maxRetries: 0 });
  const msg = await client.messages.create({
    model: 'ignored', max_tokens: 32, messages: [{ role: 'user', content: 'hello anthropic' }],
  });
  assert.equal(msg.type, 'message');
  assert.equal(msg.content[0].text, 'hello anthropic');
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.model, env('SVC_KEY_MODEL'));

  const stream = client.messages.stream({
    model: 'ignored', max_tokens: 2, messages: [{ role: 'user', content: 'alpha beta gamma' }],
  });
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, 'alpha beta');
  assert.equal(final.stop_reason, 'max_tokens');
  assert.equal(final.usage.output_tokens, 2);

  const bad = new Anthropic({ baseURL: `${base}/e/${env('SVC_KEY_SLUG')}`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(
    bad.messages.create({ model: 'x', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    Anthropic.AuthenticationError,
  );
});
