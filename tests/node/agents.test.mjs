// Agents through the Messages translation: the real @anthropic-ai/sdk (and openai for the chat side)
// against a deployment whose upstream speaks only OpenAI chat completions (the project's fake vLLM,
// which calls tools the way vLLM streams them). Run by handlers/edge/node_test.go.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const baseURL = `${env('SVC_EDGE_BASE')}/e/${env('SVC_UP_SLUG')}`;
const anthropic = new Anthropic({ baseURL, apiKey: env('SVC_UP_KEY'), maxRetries: 0, timeout: 20_000 });
const openai = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: env('SVC_UP_KEY'), maxRetries: 0, timeout: 20_000 });
const control = (what) => fetch(`${env('SVC_MOCK_CONTROL')}/${what}`, { method: 'POST' });

const weather = {
  name: 'get_weather',
  description: 'Current weather for a place',
  input_schema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};
const clock = {
  name: 'get_time',
  description: 'Current time for a place',
  input_schema: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] },
};

test('tools, plain: tool_choice any calls the tool with parsed input', async () => {
  const msg = await anthropic.messages.create({
    model: 'ignored', max_tokens: 64, tools: [weather], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'Paris' }],
  });
  assert.equal(msg.stop_reason, 'tool_use');
  const use = msg.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(msg.content));
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { location: 'Paris' });
  assert.match(use.id, /.+/);
  assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0, JSON.stringify(msg.usage));
});

test('tools, streamed: input_json_delta events and finalMessage() reassembles the input', async () => {
  const stream = anthropic.messages.stream({
    model: 'ignored', max_tokens: 64, tools: [weather, clock],
    messages: [{ role: 'user', content: 'use get_weather and get_time for Tokyo' }],
  });
  const types = [];
  let deltas = 0;
  stream.on('streamEvent', (ev) => {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'input_json_delta') deltas++;
  });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'tool_use');
  const uses = msg.content.filter((b) => b.type === 'tool_use');
  assert.deepEqual(uses.map((u) => u.name), ['get_weather', 'get_time']);
  assert.deepEqual(uses[0].input, { location: 'use get_weather and get_time for Tokyo' });
  assert.deepEqual(uses[1].input, { zone: 'use get_weather and get_time for Tokyo' });
  assert.ok(deltas >= 2, `input_json_delta events: ${deltas}`);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0, JSON.stringify(msg.usage));
});

test('disable_parallel_tool_use asks the upstream for one call', async () => {
  const msg = await anthropic.messages.create({
    model: 'ignored', max_tokens: 64, tools: [weather, clock],
    tool_choice: { type: 'auto', disable_parallel_tool_use: true },
    messages: [{ role: 'user', content: 'use get_weather and get_time for Oslo' }],
  });
  assert.equal(msg.content.filter((b) => b.type === 'tool_use').length, 1);
});

test('multi-turn with tool_use and tool_result', async () => {
  const msg = await anthropic.messages.create({
    model: 'ignored', max_tokens: 64, tools: [weather],
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: [
        { type: 'text', text: 'Let me check.' },
        { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { location: 'Paris' } },
      ] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: '18C and sunny' }] },
    ],
  });
  assert.equal(msg.stop_reason, 'end_turn');
  assert.equal(msg.content[0].type, 'text');
  assert.match(msg.content[0].text, /18C and sunny/);
});

test('image blocks reach the upstream as image parts', async () => {
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
  const msg = await anthropic.messages.create({
    model: 'ignored', max_tokens: 64,
    messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } },
      { type: 'text', text: 'describe' },
    ] }],
  });
  assert.match(msg.content[0].text, /\[2 image\(s\)\]/);
});

test('stop sequences and max_tokens give their stop reasons', async () => {
  // The fake upstream answers "The quick brown fox jumps over the lazy dog ..." and, like vLLM, names
  // the stop string it stopped at.
  let msg = await anthropic.messages.create({
    model: 'ignored', max_tokens: 64, stop_sequences: ['never-said', 'fox'],
    messages: [{ role: 'user', content: 'tell me about animals' }],
  });
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, 'fox');
  assert.equal(msg.content[0].text, 'The quick brown ');

  const streamed = anthropic.messages.stream({
    model: 'ignored', max_tokens: 64, stop_sequences: ['jumps'],
    messages: [{ role: 'user', content: 'tell me about animals' }],
  });
  msg = await streamed.finalMessage();
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, 'jumps');

  const stream = anthropic.messages.stream({
    model: 'ignored', max_tokens: 2, messages: [{ role: 'user', content: 'one two three four' }],
  });
  msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, 'max_tokens');
});

test('what cannot be translated is a 400 naming it', async () => {
  await assert.rejects(
    anthropic.messages.create({
      model: 'ignored', max_tokens: 64, thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [{ role: 'user', content: 'hi' }],
    }),
    (err) => err instanceof Anthropic.BadRequestError && /thinking/.test(err.message),
  );
});

test('an upstream 429 is a RateLimitError in both SDKs', async () => {
  await control('rate-limit');
  try {
    await assert.rejects(
      anthropic.messages.create({ model: 'ignored', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
      (err) => err instanceof Anthropic.RateLimitError && err.error?.error?.type === 'rate_limit_error',
    );
    await assert.rejects(
      openai.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
      (err) => err instanceof OpenAI.RateLimitError && err.code === 'rate_limit_exceeded',
    );
  } finally {
    await control('reset');
  }
});

test('chat completions relays streamed tool calls the openai SDK reassembles', async () => {
  const stream = openai.chat.completions.stream({
    messages: [{ role: 'user', content: 'Lima' }],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: weather.input_schema } }],
    tool_choice: 'required',
  });
  const done = await stream.finalChatCompletion();
  const call = done.choices[0].message.tool_calls[0];
  assert.equal(done.choices[0].finish_reason, 'tool_calls');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { location: 'Lima' });
});

test('a key limited to 3 requests a minute gets RateLimitError on the 4th, in both SDKs', async () => {
  const base = `${env('SVC_EDGE_BASE')}/e/${env('SVC_LIMITED_SLUG')}`;
  const oa = new OpenAI({ baseURL: `${base}/v1`, apiKey: env('SVC_LIMITED_KEY'), maxRetries: 0, timeout: 20_000 });
  const an = new Anthropic({ baseURL: base, apiKey: env('SVC_LIMITED_KEY'), maxRetries: 0, timeout: 20_000 });
  for (let i = 0; i < 3; i++) {
    const { data, response } = await oa.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    assert.equal(data.object, 'chat.completion');
    assert.equal(response.headers.get('x-ratelimit-remaining-requests'), String(2 - i));
  }
  await assert.rejects(
    oa.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof OpenAI.RateLimitError && err.code === 'rate_limit_exceeded' && Number(err.headers.get('retry-after')) > 0,
  );
  await assert.rejects(
    an.messages.create({ model: 'ignored', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
    (err) => err instanceof Anthropic.RateLimitError && err.error?.error?.type === 'rate_limit_error',
  );
});

test('the simulator calls tools too, so agents can be tried on a laptop', async () => {
  const sim = new Anthropic({ baseURL: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
  const msg = await sim.messages.stream({
    model: 'ignored', max_tokens: 64, tools: [weather], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'Bergen' }],
  }).finalMessage();
  assert.equal(msg.stop_reason, 'tool_use');
  const use = msg.content.find((b) => b.type === 'tool_use');
  assert.deepEqual(use.input, { location: 'Bergen' });
  const next = await sim.messages.create({
    model: 'ignored', max_tokens: 64, tools: [weather],
    messages: [
      { role: 'user', content: 'Bergen' },
      { role: 'assistant', content: [use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'rain all day' }] },
    ],
  });
  assert.equal(next.stop_reason, 'end_turn');
  assert.equal(next.content[0].text, 'rain all day');
});

test("the SDK's tool runner with its defaults: its thread refused with the code it falls back on", async () => {
  // toolRunner asks for a message thread (`thread: {type: "create"}`) by default; svc keeps none and
  // answers thread_unsupported_request, on which the SDK drops the thread and sends the history itself.
  const sim = new Anthropic({ baseURL: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
  const calls = [];
  const tool = betaTool({
    name: 'get_weather', description: 'Current weather for a place',
    inputSchema: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
    run: (input) => { calls.push(input.location); return `rain in ${input.location}`; },
  });
  const runner = sim.beta.messages.toolRunner({
    model: 'ignored', max_tokens: 64, tools: [tool],
    messages: [{ role: 'user', content: 'get_weather for Bergen' }],
  });
  const final = await runner.runUntilDone();
  assert.deepEqual(calls, ['get_weather for Bergen']);
  assert.equal(final.stop_reason, 'end_turn');
  assert.equal(final.content[0].text.split(' ').slice(0, 3).join(' '), 'rain in get_weather');

  // The refusal itself, as a client sees it.
  const raw = await fetch(`${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}/v1/messages`, {
    method: 'POST', headers: { 'x-api-key': env('SVC_KEY'), 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ model: 'x', max_tokens: 8, thread: { type: 'create' }, messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(raw.status, 400);
  const body = await raw.json();
  assert.equal(body.error.type, 'invalid_request_error');
  assert.deepEqual(body.error.details, { error_code: 'thread_unsupported_request', unsupported: ['thread'] });
});

test("Anthropic's models API reads an endpoint's models in Anthropic's shape", async () => {
  const sim = new Anthropic({ baseURL: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
  const ids = [];
  for await (const m of sim.models.list()) {
    assert.equal(m.type, 'model');
    assert.ok(!Number.isNaN(Date.parse(m.created_at)), JSON.stringify(m));
    ids.push(m.id);
  }
  assert.deepEqual(ids, [env('SVC_KEY_MODEL')]);
  const one = await sim.models.retrieve(env('SVC_KEY_MODEL'));
  assert.equal(one.id, env('SVC_KEY_MODEL'));
  assert.equal(one.display_name, env('SVC_KEY_MODEL'));
  // OpenAI's clients send no anthropic-version and keep OpenAI's shape.
  const oa = new OpenAI({ baseURL: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}/v1`, apiKey: env('SVC_KEY'), maxRetries: 0 });
  const m = await oa.models.retrieve(env('SVC_KEY_MODEL'));
  assert.equal(m.object, 'model');
});
