// LangChain's ChatAnthropic against svc's Messages translation. Run by handlers/edge/node_test.go
// (TestNodeSDKs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatAnthropic } from '@langchain/anthropic';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests through go test ./handlers/edge -run TestNodeSDKs`);
  return v;
};

test("LangChain ChatAnthropic: a stream reports the input tokens invoke reports (message_start's count)", async () => {
  const model = new ChatAnthropic({
    model: 'claude-sonnet-4-5', apiKey: env('SVC_KEY'), maxRetries: 0,
    anthropicApiUrl: `${env('SVC_EDGE_BASE')}/e/${env('SVC_KEY_SLUG')}`,
  });
  const prompt = [['system', 'Be brief.'], ['human', 'how many tokens does this prompt hold']];
  const invoked = await model.invoke(prompt);
  let streamed;
  for await (const chunk of await model.stream(prompt)) {
    streamed = streamed ? streamed.concat(chunk) : chunk;
  }
  assert.equal(streamed.content, invoked.content);
  assert.ok(invoked.usage_metadata.input_tokens > 0, JSON.stringify(invoked.usage_metadata));
  assert.equal(streamed.usage_metadata.input_tokens, invoked.usage_metadata.input_tokens, JSON.stringify(streamed.usage_metadata));
});
