// The OpenAI Agents SDK in its default mode (the Responses API) against an endpoint: structured output
// (outputType) and a function tool it runs. Run by handlers/edge/node_test.go (TestNodeSDKs); each test
// file runs in its own process, so the SDK's default client is set from the environment here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};
process.env.OPENAI_BASE_URL = `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}/v1`;
process.env.OPENAI_API_KEY = env('SVC_KEY');
process.env.OPENAI_AGENTS_DISABLE_TRACING = '1';
const { Agent, run, tool, setTracingDisabled } = await import('@openai/agents');
setTracingDisabled(true);

test('an agent with an outputType gets a value of its schema', async () => {
  const Event = z.object({ title: z.string(), day: z.enum(['Monday', 'Friday']), guests: z.array(z.string()) });
  const agent = new Agent({ name: 'extractor', instructions: 'Extract the event.', model: 'any', outputType: Event });
  const result = await run(agent, 'Lunch with Bob on Friday');
  assert.ok(Event.safeParse(result.finalOutput).success, JSON.stringify(result.finalOutput));
});

test('an agent runs a function tool and answers with its result', async () => {
  let called = null;
  const lookup = tool({
    name: 'lookup_order', description: 'Looks up an order', parameters: z.object({ query: z.string() }),
    execute: async ({ query }) => { called = query; return 'order 42 shipped'; },
  });
  const agent = new Agent({ name: 'support', instructions: 'Help.', model: 'any', tools: [lookup] });
  const result = await run(agent, 'lookup_order please');
  assert.equal(called, 'lookup_order please');
  assert.equal(result.finalOutput, 'order 42 shipped');
});
