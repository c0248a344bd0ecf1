// n >= 2 through the real openai SDK, plain and streamed: every choice arrives whole, and the edge
// (which assembles a streamed answer for its run) neither cuts the stream nor fails the call. Run by
// handlers/edge/node_test.go, which then reads the runs these calls recorded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const client = new OpenAI({ baseURL: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}/v1`, apiKey: env('SVC_KEY'), maxRetries: 0, timeout: 20_000 });
const messages = [{ role: 'user', content: 'node n3 three choices' }];

test('n = 3, plain: three choices', async () => {
  const res = await client.chat.completions.create({ messages, n: 3 });
  assert.equal(res.choices.length, 3);
  assert.deepEqual(res.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of res.choices) assert.equal(c.message.content, 'node n3 three choices');
});

test('n = 3, streamed: every choice whole, the stream to its end', async () => {
  const stream = await client.chat.completions.create({ messages, n: 3, stream: true, stream_options: { include_usage: true } });
  const text = ['', '', ''];
  const finish = [null, null, null];
  let usage = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.deepEqual(text, Array(3).fill('node n3 three choices'));
  assert.deepEqual(finish, ['stop', 'stop', 'stop']);
  assert.ok(usage?.completion_tokens > 0);
});
