// The Responses API, structured output and thinking through the real openai and @anthropic-ai/sdk
// packages, as agent frameworks call them. Run by handlers/edge/node_test.go (TestNodeSDKs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const base = env('SVC_EDGE_BASE');
const openai = (slug, apiKey = 'unused') => new OpenAI({ baseURL: `${base}/e/${slug}/v1`, apiKey, maxRetries: 0, timeout: 20_000 });
const sim = () => openai(env('SVC_KEY_SLUG'), env('SVC_KEY'));

const weather = {
  type: 'function', name: 'get_weather', description: 'Current weather', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
};

test('responses.create: text, instructions, usage', async () => {
  const res = await sim().responses.create({ model: 'any', instructions: 'Be brief.', input: 'hello responses' });
  assert.equal(res.object, 'response');
  assert.equal(res.status, 'completed');
  assert.equal(res.output_text, 'hello responses');
  assert.equal(res.instructions, 'Be brief.');
  assert.ok(res.usage.input_tokens > 0 && res.usage.output_tokens > 0 && res.usage.total_tokens > 0, JSON.stringify(res.usage));
  // Stored: retrieve reads it back from the run.
  const again = await sim().responses.retrieve(res.id);
  assert.equal(again.output_text, 'hello responses');
});

test('responses.stream: events and finalResponse()', async () => {
  const stream = sim().responses.stream({ model: 'any', input: 'stream these words' });
  const types = [];
  let text = '';
  stream.on('event', (ev) => types.push(ev.type));
  stream.on('response.output_text.delta', (ev) => { text += ev.delta; });
  const final = await stream.finalResponse();
  assert.equal(final.output_text, 'stream these words');
  assert.equal(text, 'stream these words');
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.equal(types.at(-1), 'response.completed');
  assert.ok(types.includes('response.output_item.done') && types.includes('response.content_part.done'), types.join(' '));
});

test('function tools and a multi-turn with function_call_output', async () => {
  const input = [{ role: 'user', content: 'use get_weather for Oslo' }];
  const first = await sim().responses.create({ model: 'any', input, tools: [weather] });
  const call = first.output.find((i) => i.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'use get_weather for Oslo' });
  // The conversation goes on with the call and its output, as agents loop.
  const second = await sim().responses.create({
    model: 'any', tools: [weather],
    input: [...input, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: 'rain, 12 degrees' }],
  });
  assert.equal(second.output_text, 'rain, 12 degrees');
  // Streamed, the call's arguments arrive as deltas.
  const stream = sim().responses.stream({ model: 'any', input, tools: [weather] });
  let args = '';
  stream.on('response.function_call_arguments.delta', (ev) => { args += ev.delta; });
  const final = await stream.finalResponse();
  assert.equal(args, JSON.stringify({ city: 'use get_weather for Oslo' }));
  assert.equal(final.output.find((i) => i.type === 'function_call').arguments, args);
});

test('previous_response_id continues a stored response', async () => {
  const client = openai(env('SVC_UP_SLUG'), env('SVC_UP_KEY'));
  const first = await client.responses.create({ model: 'any', input: 'my name is Ada' });
  const second = await client.responses.create({ model: 'any', input: 'what is my name?', previous_response_id: first.id });
  assert.equal(second.previous_response_id, first.id);
  assert.equal(second.status, 'completed');
  await assert.rejects(client.responses.create({ model: 'any', input: 'x', previous_response_id: 'resp_nope' }),
    (err) => err.status === 400 && err.code === 'previous_response_not_found');
});

test('text.format json_schema: a value valid against the schema', async () => {
  const res = await sim().responses.create({
    model: 'any', input: 'Extract the event: lunch with Bob on Friday',
    text: { format: { type: 'json_schema', name: 'event', strict: true, schema: {
      type: 'object', additionalProperties: false, required: ['name', 'day', 'people'],
      properties: { name: { type: 'string' }, day: { type: 'string', enum: ['Friday', 'Saturday'] }, people: { type: 'array', items: { type: 'string' } } },
    } } },
  });
  const value = JSON.parse(res.output_text);
  assert.equal(value.day, 'Friday');
  assert.ok(typeof value.name === 'string' && Array.isArray(value.people) && value.people.length > 0, res.output_text);
});

test('responses on a reasoning model: reasoning items and their token count, plain and streamed', async () => {
  const client = openai(env('SVC_THINK_SLUG'));
  const ask = { model: 'any', input: 'why is the sky blue', reasoning: { effort: 'low' } };
  const check = (res, how) => {
    const reasoning = res.output.find((item) => item.type === 'reasoning');
    assert.ok(reasoning, `${how}: ${JSON.stringify(res.output)}`);
    const words = reasoning.content[0].text.split(/\s+/).filter(Boolean).length;
    const details = res.usage.output_tokens_details;
    assert.equal(details.reasoning_tokens, words, `${how}: ${JSON.stringify(res.usage)}`);
    assert.ok(details.reasoning_tokens < res.usage.output_tokens, `${how}: ${JSON.stringify(res.usage)}`);
  };
  check(await client.responses.create(ask), 'plain');
  const stream = client.responses.stream(ask);
  check(await stream.finalResponse(), 'streamed');
});

test('chat.completions.parse with a zod schema', async () => {
  const Event = z.object({ name: z.string(), date: z.string(), participants: z.array(z.string()), confirmed: z.boolean(), attendees: z.number().int().min(1) });
  const res = await sim().chat.completions.parse({
    model: 'any', messages: [{ role: 'user', content: 'Alice and Bob meet on Friday' }],
    response_format: zodResponseFormat(Event, 'event'),
  });
  const parsed = res.choices[0].message.parsed;
  assert.ok(Event.safeParse(parsed).success, JSON.stringify(parsed));
});

test('thinking on a reasoning model, plain and streamed, given back in the next turn', async () => {
  const anthropic = new Anthropic({ baseURL: `${base}/e/${env('SVC_THINK_SLUG')}`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
  const ask = { model: 'any', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'why is the sky blue' }] };
  const msg = await anthropic.messages.create(ask);
  assert.equal(msg.content[0].type, 'thinking', JSON.stringify(msg.content));
  assert.match(msg.content[0].thinking, /why is the sky blue/);
  assert.ok(msg.content[0].signature.length > 10);
  assert.equal(msg.content[1].text, 'why is the sky blue');
  const stream = anthropic.messages.stream(ask);
  let thinking = '';
  stream.on('thinking', (delta) => { thinking += delta; });
  const final = await stream.finalMessage();
  assert.equal(final.content[0].type, 'thinking');
  assert.equal(final.content[0].thinking, thinking);
  assert.ok(final.content[0].signature, JSON.stringify(final.content[0]));
  const next = await anthropic.messages.create({ ...ask, messages: [...ask.messages, { role: 'assistant', content: final.content }, { role: 'user', content: 'thanks' }] });
  assert.equal(next.content.at(-1).text, 'thanks');
});

test('the prompt is counted before the answer as the answer counts it: input_tokens, count_tokens, message_start', async () => {
  const input = [{ role: 'user', content: 'count these seven words before answering them' }];
  const counted = await sim().responses.inputTokens.count({ model: 'any', input, instructions: 'Be brief.' });
  assert.equal(counted.object, 'response.input_tokens');
  const res = await sim().responses.create({ model: 'any', input, instructions: 'Be brief.' });
  assert.equal(counted.input_tokens, res.usage.input_tokens);

  const an = new Anthropic({ baseURL: `${base}/e/${env('SVC_KEY_SLUG')}`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
  const params = { model: 'any', max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user', content: 'count these seven words before answering them' }] };
  const stream = an.messages.stream(params);
  let started;
  stream.on('streamEvent', (ev) => { if (ev.type === 'message_start') started = ev.message.usage.input_tokens; });
  const final = await stream.finalMessage();
  assert.equal(started, final.usage.input_tokens);
  const tokens = await an.messages.countTokens(params);
  assert.equal(tokens.input_tokens, final.usage.input_tokens);
});

test('responses.compact: an operation svc does not serve is the route\'s 404, not a 405', async () => {
  // openai's responses.compact() posts /v1/responses/compact, which is no route of svc's.
  await assert.rejects(sim().responses.compact({ model: 'any', input: 'compact this' }), (err) => {
    assert.equal(err.status, 404, String(err));
    assert.equal(err.code, 'not_found', String(err));
    assert.equal(err.headers.get('x-should-retry'), 'false');
    assert.match(err.message, /no route POST \/v1\/responses\/compact/);
    return true;
  });
});
