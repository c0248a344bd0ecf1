// The Vercel AI SDK with its default OpenAI provider (`openai(model)`: the Responses API, store on),
// against svc's endpoints. Run by handlers/edge/node_test.go (TestNodeSDKs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
const provider = (slug, apiKey) => createOpenAI({ baseURL: `${env('SVC_EDGE_BASE')}/e/${slug}/v1`, apiKey });

test('AI SDK default provider: a two-turn conversation (the earlier answer sent back as an item reference)', async () => {
  const openai = provider(env('SVC_KEY_SLUG'), env('SVC_KEY'));
  const messages = [{ role: 'user', content: 'first turn' }];
  const one = await generateText({ model: openai(env('SVC_KEY_MODEL')), messages, maxRetries: 0 });
  assert.equal(one.text, 'first turn');
  messages.push(...one.response.messages, { role: 'user', content: 'second turn' });
  const two = await generateText({ model: openai(env('SVC_KEY_MODEL')), messages, maxRetries: 0 });
  assert.equal(two.text, 'second turn');
});

test('AI SDK default provider: a multi-step tool run on the reasoning model, streamed, reasoning shown', async () => {
  const openai = provider(env('SVC_THINK_SLUG'), 'none');
  const seen = [];
  const result = streamText({
    model: openai('sim-think'), maxRetries: 0, stopWhen: stepCountIs(4),
    providerOptions: { openai: { forceReasoning: true, reasoningSummary: 'detailed' } },
    tools: {
      get_weather: tool({
        description: 'Current weather for a place', inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }) => { seen.push(city); return `rain in ${city}`; },
      }),
    },
    prompt: 'get_weather for Bergen',
  });
  const text = await result.text;
  const steps = await result.steps;
  assert.deepEqual(seen, ['get_weather for Bergen']);
  assert.equal(steps.length, 2);
  assert.match(text, /rain in get_weather for Bergen/);
  assert.ok((await result.reasoningText)?.length > 0, 'reasoning text is empty');
});
